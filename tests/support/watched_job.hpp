// A distributed job's record made by hand, for the tests of the rank grouping
// (tests/tracker/run_ranks_test.cpp) and of its JSON and summary (tests/cli/run_ranks_test.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "memscope/watched_run.hpp"

namespace memscope::testing {

inline constexpr std::int64_t MiB = std::int64_t{1} << 20;

inline RunProcess process(int pid, int ppid, std::int64_t peak, std::optional<int> rank,
                          std::vector<std::int64_t> rss = {}) {
  RunProcess p;
  p.pid = pid;
  p.ppid = ppid;
  p.command = "proc " + std::to_string(pid);
  p.peak_rss = peak;
  p.peak_rss_source = "VmHWM";
  for (std::size_t i = 0; i < rss.size(); ++i) p.t.push_back(0.1 * static_cast<double>(i));
  p.rss = std::move(rss);
  if (rank) {
    p.rank.rank = rank;
    p.rank.rank_variable = "RANK";
    p.rank.local_rank = *rank % 2;
    p.rank.world_size = 4;
  }
  return p;
}

// A launcher (no rank), ranks 3, 1, 0 in that order of appearance, rank 1 with a worker child
// whose RSS adds to its own at the same samples, and a stage marked by rank 3.
inline RunRecord job() {
  RunRecord record;
  record.t = {0.0, 0.1, 0.2};
  record.tree_rss = {80 * MiB, 530 * MiB, 260 * MiB};
  record.processes.push_back(process(10, 1, 500 * MiB, std::nullopt, {1, 2, 3}));
  record.processes.push_back(process(13, 10, 400 * MiB, 3, {1, 400 * MiB, 1}));
  record.processes.push_back(process(11, 10, 100 * MiB, 1, {80 * MiB, 90 * MiB, 10 * MiB}));
  record.processes.push_back(process(20, 11, 50 * MiB, 1, {0, 40 * MiB, 50 * MiB}));
  record.processes.push_back(process(12, 10, 200 * MiB, 0, {1, 2, 200 * MiB}));
  record.stages.push_back(RunStage{"train", 13, 0.0, 0.2, -1, -1, {}});
  record.stages.push_back(RunStage{"eval", 13, 0.1, 0.2, -1, -1, {}});
  record.stages.push_back(RunStage{"train", 99, 0.0, 0.2, -1, -1, {}});  // another pid
  return record;
}

}  // namespace memscope::testing
