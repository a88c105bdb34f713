// memscope_replay_speed: how fast memscope replays traces, against what a user has today.
//
//   memscope_replay_speed [--events N] [--python-events N] [--repeat N] [--python PYTHON]
//
// Two traces: the repository's real PyTorch snapshot, and a synthetic trace of N events (default
// 10,000,000) in RMM's random-allocations pattern (sizes uniform in [1 B, 1 GiB], 73% of events
// allocate while live bytes stay under 16,000 MiB, otherwise a random live allocation is freed),
// generated in memory from a fixed seed on a simulated device of 1 TiB.
//
// memscope: build_replay_plan + replay through the caching allocator (peaks located, what was
// live at the peak gathered) + explain (times, tags, top sites): replay_trace() whole.
// The peer: bench/replay_speed_peer.py, run in the same process tree right after: Python's
// restricted unpickler (pickle.Unpickler whose find_class refuses every global) on the same
// snapshot, then a Python loop over the same events keeping a dict of live address -> size, the
// live bytes and their peak. For the synthetic trace the peer generates the same events with
// the same generator (splitmix64, same seed; checked by a checksum) and pickles them untimed.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "memscope/errors.hpp"
#include "memscope/trace.hpp"
#include "trace_corpus.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

template <class F>
double median_seconds(int repeat, F&& run_once) {
  std::vector<double> samples;
  for (int i = 0; i < repeat; ++i) {
    const auto start = Clock::now();
    run_once();
    samples.push_back(seconds_since(start));
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

// splitmix64: tiny, exact in Python too, so both sides generate the same trace.
struct SplitMix {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
};

constexpr std::uint64_t kSeed = 20261203;
constexpr std::uint64_t kMaxSize = memscope::GiB;
constexpr std::uint64_t kMaxUsage = 16000 * memscope::MiB;

// RMM's random_allocations pattern as a trace; `checksum` lets the peer prove it saw the same.
memscope::TorchSnapshot synthetic_trace(std::size_t events, std::uint64_t& checksum) {
  using memscope::TraceAction;
  memscope::TorchSnapshot s;
  auto& t = s.device_traces.emplace_back();
  t.reserve(events);
  SplitMix rng{kSeed};
  struct Live {
    std::uint64_t addr, size;
  };
  std::vector<Live> live;
  std::vector<std::uint64_t> free_addresses;  // freed addresses come back, as in a real pool
  std::uint64_t next_address = std::uint64_t{1} << 40, usage = 0;
  checksum = 0;
  for (std::size_t i = 0; i < events; ++i) {
    const std::uint64_t size = 1 + rng.next() % kMaxSize;
    bool alloc = true;
    if (!live.empty()) alloc = rng.next() % 100 < 73 && usage + size < kMaxUsage;
    memscope::TraceEvent e;
    e.time_us = static_cast<std::int64_t>(i);
    if (alloc) {
      std::uint64_t addr = next_address;
      if (free_addresses.empty()) {
        next_address += kMaxSize;
      } else {
        addr = free_addresses.back();
        free_addresses.pop_back();
      }
      live.push_back({addr, size});
      usage += size;
      e.action = TraceAction::alloc;
      e.addr = addr;
      e.size = size;
    } else {
      const std::size_t k = rng.next() % live.size();
      const Live gone = live[k];
      live[k] = live.back();
      live.pop_back();
      usage -= gone.size;
      free_addresses.push_back(gone.addr);
      e.action = TraceAction::free_completed;
      e.addr = gone.addr;
      e.size = gone.size;
    }
    checksum = checksum * 31 + e.addr + e.size * 7 + (alloc ? 1 : 0);
    t.push_back(e);
  }
  return s;
}

// "key=value" lines from the peer.
std::map<std::string, std::string> run_peer(const std::string& command) {
  std::map<std::string, std::string> out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char line[512];
  while (std::fgets(line, sizeof line, pipe) != nullptr) {
    std::string text(line);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    const auto eq = text.find('=');
    if (eq != std::string::npos) out[text.substr(0, eq)] = text.substr(eq + 1);
  }
  pclose(pipe);
  return out;
}

double number(const std::map<std::string, std::string>& m, const char* key) {
  const auto it = m.find(key);
  return it == m.end() ? 0.0 : std::atof(it->second.c_str());
}

std::string rate(double events, double seconds) {
  return seconds > 0 ? fmt::format("{:.2f} M", events / seconds / 1e6) : "-";
}

void print_row(const std::string& what, double events, double read_s, double replay_s) {
  fmt::print("| {:<52} | {:>10.3f} | {:>10.3f} | {:>14} | {:>14} |\n", what, read_s * 1e3,
             replay_s * 1e3, rate(events, replay_s), rate(events, read_s + replay_s));
}

void print_head(const std::string& title, std::size_t events) {
  fmt::print("\n{} ({} events)\n\n", title, events);
  fmt::print("| {:<52} | {:>10} | {:>10} | {:>14} | {:>14} |\n", "", "read (ms)", "replay (ms)",
             "replay ev/s", "read+replay ev/s");
  fmt::print("| {:-<52} | {:->10}:| {:->10}:| {:->14}:| {:->14}:|\n", "", "", "", "", "");
}

// The real trace (the corpus's small train step), beside the Python peer; false when the corpus
// does not have it.
bool time_real_trace(int repeat, const std::string& python, const std::string& peer) {
  // The real trace (the corpus's small train step).
  const auto found = memscope::corpus::find_trace(memscope::corpus::kSmallTrainStep);
  if (!found) {
    fmt::print("skipped: {}\n",
               memscope::corpus::missing_reason(memscope::corpus::kSmallTrainStep));
    return 0;
  }
  const std::string path = found->string();
  memscope::TorchSnapshot real;
  const double read_s = median_seconds(repeat, [&] { real = memscope::read_trace_file(path); });
  const std::size_t real_events = real.device_traces.at(0).size();
  memscope::ReplayResult r;
  const double replay_s = median_seconds(repeat, [&] { r = memscope::replay_trace(real); });
  memscope::ReplayPlan real_plan;
  const double real_plan_s =
      median_seconds(repeat, [&] { real_plan = memscope::build_replay_plan(real); });
  memscope::ReplayResult bare;
  const double real_loop_s = median_seconds(repeat, [&] { bare = memscope::replay(real_plan); });
  const double real_explain_s =
      median_seconds(repeat, [&] { memscope::explain_with_trace(real, real_plan, bare); });
  print_head("Real PyTorch trace: " + path, real_events);
  print_row("memscope (read_trace_file; replay_trace)", static_cast<double>(real_events), read_s,
            replay_s);
  const auto py = run_peer(fmt::format("'{}' '{}' --file '{}' --repeat {}", python, peer, path,
                                       std::max(3, repeat / 2)));
  print_row("Python restricted unpickler + dict loop", number(py, "events"), number(py, "read_s"),
            number(py, "replay_s"));
  fmt::print(
      "\nmemscope: plan {:.0f} us, replay {:.0f} us ({:.0f} ns/op in the allocator), explain "
      "{:.0f} us; peak reserved {} B, peak live {} B; Python loop: peak live {} B (no starting "
      "live set)\n",
      real_plan_s * 1e6, real_loop_s * 1e6, bare.ns_per_event, real_explain_s * 1e6,
      r.peak_reserved, r.peak_requested, py.count("peak") ? py.at("peak") : "-");
  return true;
}

// The synthetic trace of `events` RMM-style random allocations, beside the Python peer on its
// first `python_events`.
void time_synthetic_trace(std::size_t events, std::size_t python_events, const std::string& python,
                          const std::string& peer) {
  // The synthetic trace.
  std::uint64_t checksum = 0;
  const auto gen_start = Clock::now();
  const memscope::TorchSnapshot synthetic = synthetic_trace(events, checksum);
  const double gen_s = seconds_since(gen_start);
  memscope::ReplayOptions options;
  options.capacity = std::size_t{1} << 40;  // 1 TiB: nothing is refused
  memscope::ReplayPlan plan;
  const auto plan_start = Clock::now();
  plan = memscope::build_replay_plan(synthetic);
  const double plan_s = seconds_since(plan_start);
  const auto replay_start = Clock::now();
  memscope::ReplayResult s = memscope::replay(plan, options);
  const double loop_s = seconds_since(replay_start);
  const auto explain_start = Clock::now();
  memscope::explain_with_trace(synthetic, plan, s);
  const double explain_s = seconds_since(explain_start);
  print_head("Synthetic trace, RMM random allocations, seed " + std::to_string(kSeed), events);
  print_row("memscope (in memory; plan + replay + explain)", static_cast<double>(events), 0.0,
            plan_s + loop_s + explain_s);
  const auto sp = run_peer(
      fmt::format("'{}' '{}' --synthetic {} --seed {}", python, peer, python_events, kSeed));
  print_row(fmt::format("Python restricted unpickler + dict loop ({} events)",
                        static_cast<std::size_t>(number(sp, "events"))),
            number(sp, "events"), number(sp, "read_s"), number(sp, "replay_s"));
  std::uint64_t prefix_checksum = 0;
  if (python_events == events) {
    prefix_checksum = checksum;
  } else {
    (void)synthetic_trace(python_events, prefix_checksum);
  }
  fmt::print(
      "\nmemscope: generated in {:.0f} ms; plan {:.0f} ms, replay {:.0f} ms ({:.0f} ns/op in the "
      "allocator), explain {:.0f} ms; peak reserved {} B, peak live {} B, {} segments, {} OOMs\n",
      gen_s * 1e3, plan_s * 1e3, loop_s * 1e3, s.ns_per_event, explain_s * 1e3, s.peak_reserved,
      s.peak_requested, s.peak_segments, s.num_ooms);
  fmt::print(
      "same events on both sides: {} (checksum {} here, {} in Python)\n",
      sp.count("checksum") && sp.at("checksum") == std::to_string(prefix_checksum) ? "yes" : "NO",
      prefix_checksum, sp.count("checksum") ? sp.at("checksum") : "-");
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t events = 10'000'000, python_events = 2'000'000;
  int repeat = 11;
  std::string python = "python3";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--events" && i + 1 < argc) {
      events = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--python-events" && i + 1 < argc) {
      python_events = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--python" && i + 1 < argc) {
      python = argv[++i];
    } else {
      fmt::print("usage: {} [--events N] [--python-events N] [--repeat N] [--python PYTHON]\n",
                 argv[0]);
      return arg == "--help" || arg == "-h" ? 0 : 2;
    }
  }
  const std::string peer = std::string(MEMSCOPE_BENCH_DIR) + "/replay_speed_peer.py";
  try {
    if (!time_real_trace(repeat, python, peer)) return 0;
    time_synthetic_trace(events, python_events, python, peer);
    fmt::print("times: medians of {} runs (real trace); one run (synthetic)\n", repeat);
  } catch (const memscope::Error& e) {
    fmt::print(stderr, "memscope_replay_speed: {}\n", e.what());
    return 1;
  }
  return 0;
}
