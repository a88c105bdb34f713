// Writes HTML reports built in code, for test_html.py to load in headless Chromium:
//   memscope_html_fixture OUT_DIR
// run.html      a run-like report: tree RSS (sampled), two processes, GPU, stage bands, peak
// replay.html   a replay-like report: step lines, a segment map, the sites table
// million.html  one series of 1,000,000 points whose peak is at i = 654,321 (t = 654.321 s)
// empty.html    summary and tables only: no series, no chart
// hostile.html  names with "</script><b>", quotes, "<!--" and non-UTF-8 bytes everywhere
// report.json   run.html's Report as JSON, read back and rendered again as roundtrip.html
// The expectations are in test_html.py; the numbers here are chosen to be easy to check.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "memscope/report.hpp"
#include "memscope/report_html.hpp"
#include "memscope/report_json.hpp"
#include "report/report_builders.hpp"

namespace {

using memscope::report::Band;
using memscope::report::Marker;
using memscope::report::Report;
using memscope::report::SegmentMap;
using memscope::report::Series;
using memscope::report::Table;

constexpr double kMiB = 1024.0 * 1024.0;

Report run_like() {
  memscope::report::Report r;
  r.title = "memscope run: python3 train.py";
  r.subtitle = "python3 train.py --epochs 2";
  r.summary = {{"exit code", "0"}, {"duration", "10.0 s"}, {"peak tree RSS", "900 MiB"}};
  memscope::report::Series tree{"tree RSS (sampled)", {}, {}, true, false};
  memscope::report::Series a{"pid 100 RSS", {}, {}, true, false};
  memscope::report::Series b{"pid 101 RSS", {}, {}, true, false};
  memscope::report::Series gpu{"GPU used (device 0)", {}, {}, true, false};
  for (int i = 0; i <= 100; ++i) {  // every 100 ms for 10 s
    const double t = i * 0.1;
    // pid 100 rises to 600 MiB at t = 6.0 and falls; pid 101 lives from 2 s to 8 s.
    const double pa = (600.0 - std::abs(t - 6.0) * 80.0) * kMiB;
    const double pb = (t >= 2.0 && t <= 8.0) ? 300.0 * kMiB : 0.0;
    a.t.push_back(t);
    a.bytes.push_back(pa);
    if (t >= 2.0 && t <= 8.0) {
      b.t.push_back(t);
      b.bytes.push_back(pb);
    }
    tree.t.push_back(t);
    tree.bytes.push_back(pa + pb);
    gpu.t.push_back(t);
    gpu.bytes.push_back(t < 1.0 ? 0.0 : 2048.0 * kMiB);
  }
  r.series = {tree, a, b, gpu};
  r.bands = {{"load", 0.0, 2.0, "pid 100, 2.0 s"},
             {"train", 2.0, 8.0, "pid 100, 6.0 s, peak 900 MiB"},
             {"eval", 8.0, 10.0, "pid 100, 2.0 s"}};
  r.peak = memscope::report::Marker{"tree RSS (sampled)", 6.0, 900.0 * kMiB,
                                    "peak 900 MiB at 6.000 s (stage train)"};
  r.tables.push_back(memscope::report::Table{
      "Processes",
      {"pid", "command", "peak RSS", "lifetime"},
      {true, false, true, true},
      {{"100", "python3 train.py", "600.0 MiB", "10.0 s"}, {"101", "worker", "300.0 MiB", "6.0 s"}},
      "peak RSS is VmHWM (exact)"});
  r.notes = {
      "RSS over time is sampled every 100 ms; each process's peak is the kernel's VmHWM "
      "(exact)"};
  return r;
}

Report replay_like() {
  memscope::report::Report r;
  r.title = "memscope replay: trace.pickle";
  memscope::report::Series allocated{"allocated", {}, {}, false, true};
  memscope::report::Series reserved{"reserved", {}, {}, false, true};
  for (int i = 0; i < 50; ++i) {
    const double t = i * 0.02;
    allocated.t.push_back(t);
    reserved.t.push_back(t);
    allocated.bytes.push_back((i < 30 ? i : 60 - i) * 2.0 * kMiB);
    reserved.bytes.push_back((i < 30 ? i + 2 : 32) * 2.0 * kMiB);
  }
  // Live bytes run just under allocated ones: drawn dashed, on top.
  memscope::report::Series live{"live (requested)", allocated.t, allocated.bytes, false, true};
  live.dashed = true;
  r.series = {allocated, reserved, live};
  r.peak = memscope::report::Marker{"reserved", 0.6, 64.0 * kMiB,
                                    "peak reserved 64 MiB at 0.600 s (stage backward)"};
  r.bands = {{"forward", 0.0, 0.5, ""}, {"backward", 0.5, 0.98, ""}};
  memscope::report::SegmentMap map;
  map.title = "Segments at the peak (event 29, 0.580 s)";
  for (std::uint64_t s = 0; s < 3; ++s) {
    memscope::report::SegmentMap::Segment seg;
    seg.address = 0x7f0000000000ULL + s * (std::uint64_t{1} << 30);
    seg.size = (20 + s * 2) << 20;
    seg.label = "stream 0, large pool";
    std::uint64_t offset = 0;
    const char* states[] = {"active_allocated", "active_pending_free", "inactive"};
    for (int k = 0; offset < seg.size; ++k) {
      const std::uint64_t size = std::min<std::uint64_t>(seg.size - offset, 4ULL << 20);
      seg.blocks.push_back({offset, size, states[k % 3], "4 MiB, model.py:12 forward"});
      offset += size;
    }
    map.segments.push_back(seg);
  }
  // 40 alike segments in a row (one 20 MiB block each, where they differ): one row.
  for (std::uint64_t s = 0; s < 40; ++s) {
    const std::uint64_t address = 0x7f1000000000ULL + s * (std::uint64_t{1} << 30);
    map.segments.push_back({address,
                            20ULL << 20,
                            "stream 0, large pool",
                            {{0, 20ULL << 20, "active_allocated",
                              "20 MiB, model.py:" + std::to_string(s) + " forward"}}});
  }
  // Two more split in two allocated blocks, 10 + 10 and 12 + 8 MiB: they draw as the 40 do.
  for (std::uint64_t first : {10ULL << 20, 12ULL << 20}) {
    map.segments.push_back({0x7f2000000000ULL + first,
                            20ULL << 20,
                            "stream 0, large pool",
                            {{0, first, "active_allocated", "a"},
                             {first, (20ULL << 20) - first, "active_allocated", "b"}}});
  }
  r.segment_map = map;
  r.tables.push_back(memscope::report::Table{"Largest live allocations at the peak, by frame",
                                             {"where", "bytes", "count"},
                                             {false, true, true},
                                             {{"model.py:12 forward", "40.0 MiB", "10"}},
                                             ""});
  return r;
}

Report million() {
  memscope::report::Report r;
  r.title = "one million points";
  memscope::report::Series s{"allocated", {}, {}, false, false};
  constexpr std::size_t kPoints = 1'000'000;
  constexpr std::size_t kPeak = 654'321;
  s.t.reserve(kPoints);
  s.bytes.reserve(kPoints);
  for (std::size_t i = 0; i < kPoints; ++i) {
    s.t.push_back(static_cast<double>(i) * 0.001);
    // A noisy sawtooth below 1 GiB and one spike to 1.5 GiB.
    const double saw = static_cast<double>(i % 1000) * kMiB / 2.0;
    const double noise = static_cast<double>((i * 2654435761ULL) % 97) * 1024.0;
    s.bytes.push_back(i == kPeak ? 1536.0 * kMiB : 256.0 * kMiB + saw + noise);
  }
  r.series = {s};
  r.peak = memscope::report::Marker{"allocated", static_cast<double>(kPeak) * 0.001, 1536.0 * kMiB,
                                    "peak 1.5 GiB"};
  return r;
}

Report empty() {
  memscope::report::Report r;
  r.title = "saved metrics";
  r.summary = {{"stages", "2"}};
  r.tables.push_back(memscope::report::Table{
      "train", {"metric", "value"}, {false, true}, {{"train_mem_cpu_alloc_delta", "12 MiB"}}, ""});
  r.tables.push_back(memscope::report::Table{"eval", {"metric", "value"}, {false, true}, {}, ""});
  return r;
}

Report hostile() {
  const std::string evil = "</script><b>bold</b><!-- \"quoted\" 'single' & \xff\xfe end";
  memscope::report::Report r = run_like();
  r.title = "title " + evil;
  r.subtitle = evil;
  r.summary.emplace_back("key " + evil, "value " + evil);
  r.series[1].name = "pid 100 " + evil;
  r.bands[1].label = "train " + evil;
  r.bands[1].detail = evil;
  r.peak->label = "peak " + evil;
  r.tables[0].title = evil;
  r.tables[0].rows[0][1] = evil;
  r.notes.push_back(evil);
  memscope::report::SegmentMap map;
  map.title = evil;
  map.segments.push_back({0, 1 << 20, evil, {{0, 1 << 20, "active_allocated", evil}}});
  r.segment_map = map;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fputs("usage: memscope_html_fixture OUT_DIR\n", stderr);
    return 2;
  }
  try {
    const std::filesystem::path out = argv[1];
    std::filesystem::create_directories(out);
    memscope::report::write_html(run_like(), out / "run.html");
    memscope::report::write_html(replay_like(), out / "replay.html");
    memscope::report::write_html(million(), out / "million.html");
    memscope::report::write_html(empty(), out / "empty.html");
    memscope::report::write_html(hostile(), out / "hostile.html");
    const nlohmann::json json = memscope::report::report_to_json(run_like());
    std::ofstream(out / "report.json") << json.dump(1);
    memscope::report::write_html(memscope::report::report_from_json(json, "report.json"),
                                 out / "roundtrip.html");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "memscope_html_fixture: %s\n", e.what());
    return 1;
  }
  return 0;
}
