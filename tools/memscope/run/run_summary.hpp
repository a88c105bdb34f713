// The summary `memscope run` prints when its command has finished: one aligned table of the
// processes (peak RSS and where it came from, peak GPU, lifetime, exit), one of the stages
// (duration, the tree's sampled RSS peak during it, the end mark's exact figures), and the
// tree's peak, with a line saying which figures are sampled and which are the kernel's.
//
// Thread safety: pure. Errors: none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "memscope/report.hpp"
#include "run/run_record.hpp"

namespace memscope::cli {

[[nodiscard]] std::string format_run_summary(const RunRecord& record);

// The summary's tables as values: the cells the terminal prints and the HTML page shows
// (report_of_run), titled "Processes", "Stages" and "Ranks". The processes: the command and,
// when `max_rows` is not 0, only the largest peaks up to `max_rows` rows; short-lived helpers
// in one row (run_helpers.hpp). The stages: those given, in that order.
[[nodiscard]] report::Table run_processes_table(const RunRecord& record, std::size_t max_rows);
[[nodiscard]] report::Table run_stages_table(const RunRecord& record,
                                             const std::vector<const RunStage*>& stages);
[[nodiscard]] report::Table run_ranks_table(const RunRecord& record);

// A size of the record ("1.21 GiB"), or "-" for the record's -1 (unknown).
[[nodiscard]] std::string bytes_or_dash(std::int64_t bytes);

// "python train.py --epochs 3" cut to `width` code points with "..." in the middle kept short.
[[nodiscard]] std::string shorten_command(const std::string& command, std::size_t width);

}  // namespace memscope::cli
