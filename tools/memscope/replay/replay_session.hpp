// One `memscope replay` (and `memscope report` of a trace): read the trace, replay it with one
// or several allocator settings on a simulated device, optionally search the smallest device,
// and keep everything the text, JSON and HTML outputs need (replay_output.hpp).
//
// Thread safety: plain values; run_replay() uses the machine's cores through compare_settings()
// when several settings are given. Errors: UsageFailure for a --device the trace lacks or a
// --config that does not parse (naming it); InputFailure / TraceFormatError for a trace that
// cannot be read (naming the file).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "memscope/config.hpp"
#include "memscope/replay.hpp"
#include "memscope/trace.hpp"
#include "memscope/units.hpp"
#include "progress.hpp"

namespace memscope::cli {

struct ReplayRequest {
  std::filesystem::path trace;
  const std::string* trace_bytes = nullptr;  // its content when already read (a pipe reads once)
  std::optional<std::int64_t> device;        // none: the first device with a trace
  std::optional<std::size_t> capacity;       // none: 80 GiB, and no "does it fit" verdict
  std::vector<std::string> configs;          // AllocatorConfig strings; empty: the defaults
  bool fit = false;                          // search the smallest device per setting
  std::size_t precision = 2 * MiB;           // of that search
  std::size_t top_sites = 10;                // sites listed at the peak
  bool series = false;                       // keep the first setting's series (HTML, JSON report)
  std::string progress_prefix = "memscope replay: ";  // starts each progress phase
};

struct ReplayOutcome {
  std::filesystem::path trace;
  TorchSnapshot snapshot;
  ReplayPlan plan;
  std::int64_t device = 0;
  std::size_t capacity = 0;
  bool capacity_given = false;
  std::vector<std::string> configs;     // as given ("" for the defaults)
  std::vector<AllocatorConfig> parsed;  // parallel to configs
  ReplayResult first;                   // the first setting, explained with the trace
  std::vector<ComparisonRow> rows;      // every setting (rows[0] is `first`'s figures)

  // True when some setting replayed without an out-of-memory error.
  [[nodiscard]] bool fits() const noexcept;
  // The setting that fits with the fewest bytes reserved at the peak (index into rows), or
  // rows.size() when none fits.
  [[nodiscard]] std::size_t best_row() const noexcept;
  // The smallest capacity any setting fits on (index into rows), or rows.size() when not
  // searched or none fits.
  [[nodiscard]] std::size_t smallest_fit_row() const noexcept;
};

// Size options as people write them ("24GiB", "80GB"); UsageFailure naming `option` otherwise,
// also for a number without a unit ("24": parse_size_with_unit()).
[[nodiscard]] std::size_t parse_size_option(const std::string& text, const std::string& option);

[[nodiscard]] ReplayOutcome run_replay(const ReplayRequest& request, Progress& progress);

}  // namespace memscope::cli
