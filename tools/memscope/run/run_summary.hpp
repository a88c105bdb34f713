// The summary `memscope run` prints when its command has finished: one aligned table of the
// processes (peak RSS and where it came from, peak GPU, lifetime, exit), one of the stages
// (duration, the tree's sampled RSS peak during it, the end mark's exact figures), and the
// tree's peak, with a line saying which figures are sampled and which are the kernel's.
//
// Thread safety: pure. Errors: none.
#pragma once

#include <cstdint>
#include <string>

#include "run/run_record.hpp"

namespace memscope::cli {

[[nodiscard]] std::string format_run_summary(const RunRecord& record);

// A size of the record ("1.21 GiB"), or "-" for the record's -1 (unknown).
[[nodiscard]] std::string bytes_or_dash(std::int64_t bytes);

// "python train.py --epochs 3" cut to `width` code points with "..." in the middle kept short.
[[nodiscard]] std::string shorten_command(const std::string& command, std::size_t width);

}  // namespace memscope::cli
