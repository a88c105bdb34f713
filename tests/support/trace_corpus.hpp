// The corpus of real PyTorch traces that tests, benchmarks and the demo read. The project
// commits none of them (they were recorded by other people; provenance and licences live
// beside the files): one setting says where they are, the same rule in C++ and Python
// (tests/support/trace_corpus.py):
//
//   MEMSCOPE_TRACES (environment), when set and not empty;
//   else ../shared/traces beside the checkout (compiled in as MEMSCOPE_DEFAULT_TRACES).
//
// A test that needs a trace the corpus does not hold skips with the reason (ctest reports it as
// Skipped), never passes silently: MEMSCOPE_TRACE_OR_SKIP below.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#ifndef MEMSCOPE_DEFAULT_TRACES
#error "link the target through memscope_use_trace_corpus() (CMakeLists.txt)"
#endif

namespace memscope::corpus {

// The trace the single-trace tests pin their reference numbers on (its README in the corpus).
inline constexpr std::string_view kSmallTrainStep =
    "torch_snapshot_cs336-small_ctx256_bs32_fwd_bwd.pickle";

// The folder the rule above names (it may not exist).
[[nodiscard]] inline std::filesystem::path traces_dir() {
  const char* set = std::getenv("MEMSCOPE_TRACES");  // NOLINT(concurrency-mt-unsafe): read only
  return (set != nullptr && *set != '\0') ? std::filesystem::path(set)
                                          : std::filesystem::path(MEMSCOPE_DEFAULT_TRACES);
}

// Every trace in the corpus (*.pickle, *.json), sorted by name; empty when there is none.
[[nodiscard]] inline std::vector<std::filesystem::path> all_traces() {
  std::vector<std::filesystem::path> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(traces_dir(), ec)) {
    const auto ext = entry.path().extension();
    if (entry.is_regular_file(ec) && (ext == ".pickle" || ext == ".json")) {
      found.push_back(entry.path());
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

// The named trace, when the corpus holds it.
[[nodiscard]] inline std::optional<std::filesystem::path> find_trace(std::string_view name) {
  std::error_code ec;
  std::filesystem::path path = traces_dir() / std::string(name);
  if (std::filesystem::is_regular_file(path, ec)) return path;
  return std::nullopt;
}

// Why a test that needs `name` cannot run (for GTEST_SKIP and the benchmarks' messages).
[[nodiscard]] inline std::string missing_reason(std::string_view name) {
  return "no trace " + std::string(name) + " in " + traces_dir().string() +
         " (the corpus of real traces; set MEMSCOPE_TRACES to the folder that holds it)";
}

}  // namespace memscope::corpus

// Declares `const std::filesystem::path var` naming the trace, or skips the test with the reason.
#define MEMSCOPE_TRACE_OR_SKIP(var, name)                                     \
  const auto var##_found = ::memscope::corpus::find_trace(name);              \
  if (!var##_found) GTEST_SKIP() << ::memscope::corpus::missing_reason(name); \
  const std::filesystem::path var = *var##_found
