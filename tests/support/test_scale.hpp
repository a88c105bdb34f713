// How much of a scale test runs. A scale test repeats one check over the corpus of real traces,
// over seeds, or over iterations; it lives in a binary labelled `scale` (one per folder). The
// Release build (`make test`) runs them in full. The sanitizer builds' ctest presets set
// MEMSCOPE_TEST_SCALE=smoke, and the same tests then run a subset that still takes every code
// path: a sanitizer finds an error on the path that has it, not on the thousandth seed through
// the same path, and a single-threaded replay under ASan costs 10-30x the Release time.
//
//   full  (unset, or any other value): everything as written.
//   smoke: at most kSmokeSeeds seeds of each random family, at most kSmokeIterations iterations
//          back to back (two, so that a second iteration reuses the first's cache), and one
//          trace of the corpus (the small train step of the README's figures, else the first).
//
// MEMSCOPE_RANDOM_STEPS=N (the random-step searches) overrides the seed count at either scale.
// Test code only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <vector>

namespace memscope::testing {

inline constexpr std::uint64_t kSmokeSeeds = 100;
inline constexpr int kSmokeIterations = 2;

// True when the ctest preset (asan, tsan) asked for the subset.
[[nodiscard]] inline bool smoke_scale() {
  const char* scale = std::getenv("MEMSCOPE_TEST_SCALE");  // NOLINT(concurrency-mt-unsafe)
  return scale != nullptr && std::string_view(scale) == "smoke";
}

// Seeds 1..n of a random family: n, or at most kSmokeSeeds in smoke scale.
[[nodiscard]] inline std::uint64_t scaled_seeds(std::uint64_t full) {
  if (const char* env = std::getenv("MEMSCOPE_RANDOM_STEPS")) {  // NOLINT(concurrency-mt-unsafe)
    return std::strtoull(env, nullptr, 10);
  }
  return smoke_scale() ? std::min(full, kSmokeSeeds) : full;
}

// Iterations back to back: `full`, or at most kSmokeIterations in smoke scale.
[[nodiscard]] inline int scaled_iterations(int full) {
  return smoke_scale() ? std::min(full, kSmokeIterations) : full;
}

// The traces a corpus-wide test visits: all of them, or one in smoke scale (`preferred` when
// the corpus holds it, else the first by name).
[[nodiscard]] inline std::vector<std::filesystem::path> scaled_traces(
    std::vector<std::filesystem::path> traces, std::string_view preferred) {
  if (!smoke_scale() || traces.size() <= 1) return traces;
  const auto it = std::find_if(traces.begin(), traces.end(), [&](const auto& path) {
    return path.filename().string() == preferred;
  });
  return {it != traces.end() ? *it : traces.front()};
}

}  // namespace memscope::testing
