#include "run/run_helpers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <utility>

namespace memscope::cli {

std::string program_of(std::string_view command) {
  if (command.size() > 2 && command.front() == '[' && command.back() == ']') {
    return std::string(command.substr(1, command.size() - 2));
  }
  std::string_view first = command.substr(0, command.find(' '));
  if (const std::size_t slash = first.rfind('/'); slash != std::string_view::npos) {
    first.remove_prefix(slash + 1);
  }
  return first.empty() ? std::string("?") : std::string(first);
}

std::vector<bool> short_lived_helpers(const RunRecord& record) {
  std::vector<bool> helpers(record.processes.size(), false);
  std::int64_t tree_peak = record.peak_tree_rss;
  for (const RunProcess& p : record.processes) tree_peak = std::max(tree_peak, p.peak_rss);
  std::set<int> keep;  // pids that mark stages or belong to a rank
  for (const RunMark& m : record.marks) keep.insert(m.pid);
  for (const RunRank& r : record.ranks) keep.insert(r.pids.begin(), r.pids.end());
  const auto limit = static_cast<double>(tree_peak) * kHelperShare;
  std::size_t count = 0;
  for (std::size_t i = 1; i < record.processes.size(); ++i) {  // [0] is the command
    const RunProcess& p = record.processes[i];
    helpers[i] = p.end >= 0 && p.end - p.start < kHelperLifetime &&
                 static_cast<double>(p.peak_rss) < limit && p.peak_gpu <= 0 &&
                 !keep.contains(p.pid);
    if (helpers[i]) ++count;
  }
  if (count < 2) std::fill(helpers.begin(), helpers.end(), false);
  return helpers;
}

HelperRow helper_row(const RunRecord& record, const std::vector<bool>& helpers) {
  HelperRow row;
  std::map<std::string, std::size_t> programs;
  for (std::size_t i = 0; i < helpers.size(); ++i) {
    if (!helpers[i]) continue;
    const RunProcess& p = record.processes[i];
    if (row.count++ == 0) {
      row.first = i;
      row.start = p.start;
    }
    row.end = std::max(row.end, p.end);
    row.peak_rss = std::max(row.peak_rss, p.peak_rss);
    if ((p.exit_code && *p.exit_code != 0) || p.exit_signal) ++row.failed;
    ++programs[program_of(p.command)];
  }
  if (row.count == 0) return row;
  // The most frequent programs first.
  std::vector<std::pair<std::string, std::size_t>> order(programs.begin(), programs.end());
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  row.command = fmt::format("{} short-lived helpers:", row.count);
  for (std::size_t i = 0; i < order.size(); ++i) {
    row.command += fmt::format("{} {} × {}", i == 0 ? "" : ",", order[i].first, order[i].second);
  }
  return row;
}

}  // namespace memscope::cli
