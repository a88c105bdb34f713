#include "memscope/run_ranks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace memscope {
namespace {

// Adds `value` to a sum that stays -1 until something is known.
void add_known(std::int64_t& sum, std::int64_t value) {
  if (value < 0) return;
  sum = sum < 0 ? value : sum + value;
}

}  // namespace

std::vector<RunRank> group_ranks(const RunRecord& record) {
  const std::vector<RunProcess>& processes = record.processes;
  std::map<int, std::vector<std::size_t>> by_rank;  // rank -> indices in order of appearance
  for (std::size_t i = 0; i < processes.size(); ++i) {
    if (processes[i].rank.rank) by_rank[*processes[i].rank.rank].push_back(i);
  }
  std::vector<RunRank> ranks;
  for (const auto& [rank, members] : by_rank) {
    std::set<int> pids;
    for (const std::size_t i : members) pids.insert(processes[i].pid);
    // Its own process: the first whose parent is not of this rank. A pid reused by an
    // unrelated process cannot make every member look like a child, so one is always found;
    // the first member stands in if not.
    std::size_t own = members.front();
    for (const std::size_t i : members) {
      if (pids.count(processes[i].ppid) == 0) {
        own = i;
        break;
      }
    }
    const RunProcess& main = processes[own];
    RunRank r;
    r.rank = rank;
    r.variable = main.rank.rank_variable;
    r.local_rank = main.rank.local_rank;
    r.world_size = main.rank.world_size;
    r.local_world_size = main.rank.local_world_size;
    r.pid = main.pid;
    r.command = main.command;
    r.own_peak_rss = main.peak_rss;
    r.start = main.start;
    r.end = main.end;
    r.exit_code = main.exit_code;
    r.exit_signal = main.exit_signal;
    r.pids.push_back(main.pid);
    // The rank's summed RSS at each sample time (every process's t holds the record's own
    // sample times, so equal times are the same sample).
    std::map<double, std::int64_t> summed;
    for (const std::size_t i : members) {
      const RunProcess& p = processes[i];
      if (i != own) r.pids.push_back(p.pid);
      add_known(r.sum_of_peaks, p.peak_rss);
      add_known(r.peak_gpu, p.peak_gpu);
      for (std::size_t k = 0; k < p.t.size() && k < p.rss.size(); ++k) summed[p.t[k]] += p.rss[k];
    }
    for (const auto& [t, rss] : summed) r.sampled_peak_rss = std::max(r.sampled_peak_rss, rss);
    r.peak_rss = main.peak_rss;
    r.peak_rss_source = main.peak_rss_source;
    // One process: its own peak is exact, and a sample of it can only be lower.
    if (members.size() > 1 && r.sampled_peak_rss > r.peak_rss) {
      r.peak_rss = r.sampled_peak_rss;
      r.peak_rss_source = "sampled sum";
    }
    for (const RunStage& s : record.stages) {
      const bool ours = std::any_of(members.begin(), members.end(),
                                    [&](std::size_t i) { return processes[i].pid == s.pid; });
      if (ours && std::find(r.stages.begin(), r.stages.end(), s.name) == r.stages.end())
        r.stages.push_back(s.name);
    }
    ranks.push_back(std::move(r));
  }
  return ranks;  // std::map kept them sorted by rank
}

RankSpread rank_spread(const std::vector<RunRank>& ranks, std::int64_t RunRank::*figure) noexcept {
  RankSpread spread;
  double sum = 0.0;
  for (const RunRank& r : ranks) {
    const std::int64_t value = r.*figure;
    if (value < 0) continue;
    // Strict comparisons: the first of equal figures stays, and ranks come sorted.
    if (spread.max == nullptr || value > spread.max->*figure) spread.max = &r;
    if (spread.min == nullptr || value < spread.min->*figure) spread.min = &r;
    sum += static_cast<double>(value);
    ++spread.known;
  }
  if (spread.known > 0)
    spread.mean = static_cast<std::int64_t>(sum / static_cast<double>(spread.known));
  return spread;
}

}  // namespace memscope
