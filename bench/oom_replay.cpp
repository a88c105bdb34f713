// memscope_oom_replay: out-of-memory in a replay of many streams (issue 44, item 10). An RMM log
// of N streams, one small allocation each, kept (many_streams_log.hpp), replayed on the default
// 80 GiB device: the first 40,960 streams fill it with 2 MiB segments, and every allocation
// after that is refused. Each refusal once released every cached segment first, walking every
// stream's pools (and dropping those left without segments) although nothing had been freed
// since the last such walk: 60,000 streams took 35 s, 300,000 over 120 s.
// Goal: linear; 300,000 streams in under 2 s (read, plan, replay and explain: replay_trace()).
//
//   memscope_oom_replay [--streams N] [--free-every K] [--capacity SIZE] [--config CONF]
//                       [--write FILE] [--goal]
//
// --free-every K: every K-th stream frees its block at once, so some refusals find a whole
// cached segment to release and succeed. --write FILE: also writes the log, for
// `memscope replay FILE` (timed with /usr/bin/time -v in docs/benchmarks.md).
// Prints the seconds and the outcome; with --goal, exits 1 when 300,000 streams take 2 s or more.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "many_streams_log.hpp"
#include "memscope/replay.hpp"
#include "memscope/trace.hpp"
#include "memscope/units.hpp"

int main(int argc, char** argv) {
  std::size_t streams = 300'000;
  std::size_t free_every = 0;
  memscope::ReplayOptions options;  // 80 GiB, default settings: as `memscope replay`
  std::string write;
  bool goal = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--streams" && has_value) {
      streams = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--free-every" && has_value) {
      free_every = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--capacity" && has_value) {
      options.capacity = memscope::parse_size(argv[++i], "--capacity");
    } else if (a == "--config" && has_value) {
      options.config = memscope::AllocatorConfig::parse(argv[++i]);
    } else if (a == "--write" && has_value) {
      write = argv[++i];
    } else if (a == "--goal") {
      goal = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--streams N] [--free-every K] [--capacity SIZE] [--config CONF] "
                   "[--write FILE] [--goal]\n",
                   argv[0]);
      return 2;
    }
  }
  const std::string csv = memscope::bench::many_streams_rmm_log(streams, free_every);
  if (!write.empty()) std::ofstream(write, std::ios::binary) << csv;
  const auto start = std::chrono::steady_clock::now();
  const memscope::TorchSnapshot snapshot = memscope::read_rmm_log(csv, "generated.csv");
  const memscope::ReplayResult result = memscope::replay_trace(snapshot, 0, options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "streams %zu (log %.1f MB): %.3f s; %lld refused, %lld retries, peak reserved %s, "
      "peak segments %lld\n",
      streams, static_cast<double>(csv.size()) / 1e6, seconds,
      static_cast<long long>(result.num_ooms), static_cast<long long>(result.num_alloc_retries),
      memscope::format_bytes(result.peak_reserved).c_str(),
      static_cast<long long>(result.peak_segments));
  if (goal) {
    const bool met = streams < 300'000 || seconds < 2.0;
    std::printf("goal (300,000 streams under 2 s): %s\n", met ? "met" : "missed");
    return met ? 0 : 1;
  }
  return 0;
}
