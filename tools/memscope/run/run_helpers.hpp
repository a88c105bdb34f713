// Short-lived helper processes in a `memscope run` record: a pyenv or conda shim's bash, sed
// and cat, a make's shells. They are listed one row each in the JSON, and collapsed into one
// row ("12 short-lived helpers: bash × 5, sed × 4, cat × 3") in the summary's and the HTML
// report's process tables, where 4 to 30 of them would bury the processes that matter.
//
// A helper is a process that is not the command itself, has ended, lived less than
// kHelperLifetime seconds, peaked below kHelperShare of the tree's peak (the larger of the
// sampled tree peak and the largest process peak), held no GPU memory, marked no stage and
// belongs to no rank. They collapse only when there are at least two.
//
// Thread safety: pure. Errors: none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "run/run_record.hpp"

namespace memscope::cli {

inline constexpr double kHelperLifetime = 1.0;  // seconds
inline constexpr double kHelperShare = 0.01;    // of the tree's peak

struct HelperRow {
  std::size_t count = 0;
  std::size_t first = 0;  // index of the first helper in record.processes: where the row goes
  std::string command;    // "12 short-lived helpers: bash × 5, sed × 4, cat × 3"
  std::int64_t peak_rss = -1;
  double start = 0.0;      // the first one's start
  double end = 0.0;        // the last one's end
  std::size_t failed = 0;  // how many exited with a code other than 0 or by a signal
};

// The program of a command line: "bash" for "/usr/bin/bash -e x.sh", "sed" for "[sed]" (a
// kernel thread's name), "?" for an empty one.
[[nodiscard]] std::string program_of(std::string_view command);

// Parallel to record.processes: true for each helper that collapses (none when fewer than 2).
[[nodiscard]] std::vector<bool> short_lived_helpers(const RunRecord& record);

// The collapsed row of the helpers `helpers` marks (count 0 when there are none).
[[nodiscard]] HelperRow helper_row(const RunRecord& record, const std::vector<bool>& helpers);

}  // namespace memscope::cli
