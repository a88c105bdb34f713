// memscope_write_speed: how fast memscope writes a PyTorch snapshot (pickle protocol 4 and JSON),
// against Python writing the same dict (pickle.dumps, json.dumps), measured in the same run.
//
//   memscope_write_speed [--events N] [--seconds S] [--python PYTHON]
//
// Two snapshots: the real PyTorch trace in the corpus (read by memscope), and a synthetic one of
// N events (default 1,000,000; 2,000 distinct stacks of 4 to 12 frames, 5 tags). Each figure is
// the median time of one whole write over repeated writes for about S seconds (default 2).
// Python's figures come from bench/write_speed_peer.py on the pickle memscope wrote (skipped
// when there is no Python).
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "memscope/trace.hpp"
#include "run_command.hpp"
#include "trace_corpus.hpp"

namespace {

template <class F>
double median_ms(double seconds, F&& once) {
  std::vector<double> times;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  do {
    const auto start = std::chrono::steady_clock::now();
    once();
    times.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
  } while (std::chrono::steady_clock::now() < end || times.size() < 3);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

memscope::TorchSnapshot synthetic(std::size_t events) {
  std::mt19937_64 rng(1);
  memscope::TorchSnapshot s;
  std::vector<memscope::StackId> stacks;
  for (int i = 0; i < 2000; ++i) {
    std::vector<memscope::TraceFrame> frames;
    for (std::uint64_t f = 4 + rng() % 9; f > 0; --f) {
      frames.push_back({fmt::format("/home/user/project/src/module_{}.py", rng() % 40),
                        static_cast<std::int64_t>(rng() % 2000),
                        fmt::format("fn_{}", rng() % 300)});
    }
    stacks.push_back(s.strings.intern_stack(frames));
  }
  std::vector<memscope::TagId> tags;
  for (const char* t : {"init", "train", "eval", "forward", "backward"}) {
    tags.push_back(s.strings.intern_tag(t));
  }
  auto& trace = s.device_traces.emplace_back();
  trace.reserve(events);
  std::vector<std::uint64_t> live;
  std::uint64_t next = 0x7f0000000000;
  for (std::size_t i = 0; i < events; ++i) {
    memscope::TraceEvent e;
    if (live.empty() || rng() % 2 == 0) {
      e.action = memscope::TraceAction::alloc;
      e.addr = next;
      next += 512 * (1 + rng() % 4096);
      live.push_back(e.addr);
    } else {
      e.action = (i % 2 == 0) ? memscope::TraceAction::free_requested
                              : memscope::TraceAction::free_completed;
      e.addr = live.back();
      if (e.action == memscope::TraceAction::free_completed) live.pop_back();
    }
    e.size = 1 + rng() % (1 << 24);
    e.rounded_size = e.size + rng() % 512;
    e.time_us = 1'700'000'000'000'000 + static_cast<std::int64_t>(i);
    e.stack = stacks[rng() % stacks.size()];
    e.tag = tags[rng() % tags.size()];
    trace.push_back(e);
  }
  return s;
}

std::string python_figures(const std::string& python, const std::string& path, double seconds) {
  return memscope::bench::run_command(
      fmt::format("'{}' '{}/write_speed_peer.py' '{}' {} 2>/dev/null", python, MEMSCOPE_BENCH_DIR,
                  path, seconds));
}

void measure(const char* name, const memscope::TorchSnapshot& s, double seconds,
             const std::string& python) {
  std::size_t events = 0;
  for (const auto& t : s.device_traces) events += t.size();
  std::string pickle;
  std::string json;
  const double pickle_ms = median_ms(seconds, [&] { pickle = memscope::torch_snapshot_pickle(s); });
  const double json_ms = median_ms(seconds, [&] { json = memscope::torch_snapshot_json(s); });
  fmt::print("{}: {} events, {} segments\n", name, events, s.segments.size());
  fmt::print("  memscope pickle: {:8.1f} ms  {:7.1f} MB  {:6.0f} ns/event\n", pickle_ms,
             static_cast<double>(pickle.size()) / 1e6,
             pickle_ms * 1e6 / static_cast<double>(events));
  fmt::print("  memscope JSON:   {:8.1f} ms  {:7.1f} MB  {:6.0f} ns/event\n", json_ms,
             static_cast<double>(json.size()) / 1e6, json_ms * 1e6 / static_cast<double>(events));
  const auto path = std::filesystem::temp_directory_path() / "memscope_write_speed.pickle";
  std::ofstream(path, std::ios::binary) << pickle;
  const std::string peer = python.empty() ? "" : python_figures(python, path.string(), seconds);
  std::filesystem::remove(path);
  if (peer.empty()) {
    fmt::print("  Python: not measured (no interpreter)\n");
    return;
  }
  double py_pickle = 0;
  double py_json = 0;
  if (std::sscanf(peer.c_str(), "%lf %lf", &py_pickle, &py_json) != 2) return;
  fmt::print("  Python pickle.dumps(d, 4): {:8.1f} ms (memscope x{:.1f})\n", py_pickle,
             py_pickle / pickle_ms);
  fmt::print("  Python json.dumps(d):      {:8.1f} ms (memscope x{:.1f})\n", py_json,
             py_json / json_ms);
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t events = 1'000'000;
  double seconds = 2.0;
  std::string python = "python3";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i];
    if (arg == "--events") {
      events = std::stoull(argv[i + 1]);
    } else if (arg == "--seconds") {
      seconds = std::stod(argv[i + 1]);
    } else if (arg == "--python") {
      python = argv[i + 1];
    } else {
      fmt::print(stderr, "usage: memscope_write_speed [--events N] [--seconds S] [--python PY]\n");
      return 2;
    }
  }
  if (const auto real = memscope::corpus::find_trace(memscope::corpus::kSmallTrainStep)) {
    measure("real trace (the corpus's small train step)", memscope::read_torch_snapshot_file(*real),
            seconds, python);
  } else {
    fmt::print("real trace skipped: {}\n",
               memscope::corpus::missing_reason(memscope::corpus::kSmallTrainStep));
  }
  measure("synthetic", synthetic(events), seconds, python);
  return 0;
}
