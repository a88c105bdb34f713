// An RMM log (rmm::mr::logging_resource_adaptor's CSV) of many streams, one allocation each:
// the shape that made out-of-memory in a replay quadratic (issue 44, item 10). Each stream
// allocates 1-7 KiB (so each takes a 2 MiB small segment of its own) and keeps it; after every
// `free_every`-th stream s (0: none), stream s / 2 frees its block, leaving a whole cached
// segment that an out-of-memory retry can release. On a device of C bytes the first C / 2 MiB
// streams fit; every later allocation is refused, but the first after such a free (the retry
// releases the freed segment and the stream takes its room).
//
// Used by bench/oom_replay.cpp (the speed goal) and tests/trace/rmm_log_test.cpp (the outcome
// at a test size). Deterministic: no randomness.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

namespace memscope::bench {

inline std::string many_streams_rmm_log(std::size_t streams, std::size_t free_every = 0) {
  std::string csv = "Thread,Time,Action,Pointer,Size,Stream\n";
  csv.reserve(streams * 56 + 64);
  char line[128];
  std::size_t us = 0;
  const auto row = [&](const char* action, std::size_t stream, std::size_t size) {
    const std::size_t t = us++;
    const int n = std::snprintf(line, sizeof line, "1,10:%02zu:%02zu.%06zu,%s,0x%zx,%zu,0x%zx\n",
                                t / 60'000'000 % 60, t / 1'000'000 % 60, t % 1'000'000, action,
                                0x7f0000000000 + stream * 0x2000, size, stream);
    csv.append(line, static_cast<std::size_t>(n));
  };
  for (std::size_t s = 1; s <= streams; ++s) {
    const std::size_t size = 1024 * (1 + s % 7);
    row("allocate", s, size);
    if (free_every != 0 && s % free_every == 0) row("free", s / 2, 1024 * (1 + s / 2 % 7));
  }
  return csv;
}

}  // namespace memscope::bench
