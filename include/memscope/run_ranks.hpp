// The ranks of a distributed job (torchrun, mpirun, srun) under `memscope run`: its processes
// grouped by the rank their environment names (rank_env.hpp), one RunRank per rank.
//
// Grouping rule: every process whose environment names rank R belongs to rank R. A rank's own
// process is the first seen whose parent is not of rank R (the launcher, which names no rank,
// has no line); the rest are its descendants (DataLoader workers, compile workers, a pyenv
// shim's helpers), which inherit the variables.
//
// A rank's peak RSS: with one process (the usual case), that process's own exact peak. With
// more, the larger of its own process's peak and the highest sample of all its processes'
// summed RSS: a lower bound of what the rank held at once (its processes peak at different
// times, and samples can miss a peak). sum_of_peaks, the sum of every process's own peak, is
// the upper bound beside it. GPU peaks sum per process.
//
// Thread safety: pure. Ownership: a RankSpread points into the vector it was made from.
// Errors: none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "memscope/watched_run.hpp"

namespace memscope {

// The ranks of `record` (its processes' rank fields; stages by pid), sorted by rank.
[[nodiscard]] std::vector<RunRank> group_ranks(const RunRecord& record);

// One figure (peak_rss, peak_gpu...) over the ranks that know it (>= 0): the ranks holding the
// max and the min (the lowest rank among ties), and the mean; max and min are nullptr and known
// 0 when no rank knows it.
struct RankSpread {
  const RunRank* max = nullptr;
  const RunRank* min = nullptr;
  std::int64_t mean = -1;
  std::size_t known = 0;
};
[[nodiscard]] RankSpread rank_spread(const std::vector<RunRank>& ranks,
                                     std::int64_t RunRank::*figure) noexcept;

}  // namespace memscope
