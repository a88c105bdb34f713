// The report of a `memscope run` recording (run_report.hpp): tree RSS, each process's RSS and
// GPU memory over time, stage bands, the peak; tables of processes, stages and ranks.
#include "run/run_report.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "memscope/run_ranks.hpp"
#include "memscope/units.hpp"
#include "run/run_helpers.hpp"
#include "run/run_summary.hpp"

namespace memscope::cli {

namespace {

// Processes drawn as their own line; more would make the legend and the colours unreadable.
constexpr std::size_t kMaxProcessLines = 8;

std::string seconds(double s) {
  return fmt::format("{:.3f} s", s);
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

template <typename T>
std::vector<double> as_doubles(const std::vector<T>& values) {
  std::vector<double> out;
  out.reserve(values.size());
  for (const T v : values) out.push_back(static_cast<double>(v));
  return out;
}

std::int64_t process_peak(const RunProcess& p) {
  std::int64_t peak = p.peak_rss;
  for (const std::int64_t v : p.rss) peak = std::max(peak, v);
  return peak;
}

void add_run_series(const RunRecord& record, report::Report& report) {
  const std::size_t n = std::min(record.t.size(), record.tree_rss.size());
  report::Series tree{"tree RSS (sampled)", {}, {}, true, false};
  tree.t.assign(record.t.begin(), record.t.begin() + static_cast<std::ptrdiff_t>(n));
  tree.bytes = as_doubles(record.tree_rss);
  tree.bytes.resize(n);
  report.series.push_back(std::move(tree));

  std::vector<const RunProcess*> drawn;
  for (const RunProcess& p : record.processes) {
    if (!p.t.empty()) drawn.push_back(&p);
  }
  std::stable_sort(drawn.begin(), drawn.end(), [](const RunProcess* a, const RunProcess* b) {
    return process_peak(*a) > process_peak(*b);
  });
  if (drawn.size() > kMaxProcessLines) {
    report.notes.push_back(fmt::format(
        "{} processes ran; the chart draws the {} with the largest peak RSS (the tables list "
        "all of them, and the tree's line includes every one).",
        drawn.size(), kMaxProcessLines));
    drawn.resize(kMaxProcessLines);
  }
  // Back in order of appearance, so colours follow the order processes started.
  std::sort(drawn.begin(), drawn.end());
  for (const RunProcess* p : drawn) {
    report::Series s{fmt::format("pid {} RSS", p->pid), p->t, as_doubles(p->rss), true, false};
    s.bytes.resize(std::min(s.bytes.size(), s.t.size()));
    s.t.resize(s.bytes.size());
    report.series.push_back(std::move(s));
  }
  for (const RunGpu& gpu : record.gpus) {
    if (gpu.used.empty()) continue;
    report::Series s{fmt::format("GPU used (device {})", gpu.index), record.t, as_doubles(gpu.used),
                     true, false};
    const std::size_t m = std::min(s.t.size(), s.bytes.size());
    s.t.resize(m);
    s.bytes.resize(m);
    report.series.push_back(std::move(s));
  }
  if (std::any_of(record.tree_gpu.begin(), record.tree_gpu.end(),
                  [](std::int64_t v) { return v > 0; })) {
    report::Series s{"tree GPU", record.t, as_doubles(record.tree_gpu), true, false};
    const std::size_t m = std::min(s.t.size(), s.bytes.size());
    s.t.resize(m);
    s.bytes.resize(m);
    report.series.push_back(std::move(s));
  }
}

// The terminal's table of the ranks (run_summary.hpp), with the max and which rank under it.
report::Table ranks_table(const RunRecord& record) {
  report::Table table = run_ranks_table(record);
  const std::vector<RunRank>& ranks = record.ranks;
  const RankSpread spread = rank_spread(ranks, &RunRank::peak_rss);
  if (spread.max != nullptr) {
    table.note = fmt::format(
        "max peak RSS {} on rank {}, min {} on rank {}; a rank with children (which inherit "
        "its rank) peaks at the larger of its own process's peak and their summed RSS sampled",
        format_bytes(spread.max->peak_rss), spread.max->rank, format_bytes(spread.min->peak_rss),
        spread.min->rank);
  }
  return table;
}

}  // namespace

namespace {

// A run may mark hundreds of thousands of stages (200,000 made a 48 MB page): the bands and
// the stage table show at most kMaxStagesShown, those with the highest tree RSS peak (the
// earlier first among equals), in the recording's order.
constexpr std::size_t kMaxStagesShown = 2000;

std::vector<const RunStage*> shown_stages(const RunRecord& record) {
  std::vector<const RunStage*> out;
  out.reserve(std::min(record.stages.size(), kMaxStagesShown));
  if (record.stages.size() <= kMaxStagesShown) {
    for (const RunStage& s : record.stages) out.push_back(&s);
    return out;
  }
  std::vector<const RunStage*> all;
  all.reserve(record.stages.size());
  for (const RunStage& s : record.stages) all.push_back(&s);
  const auto higher = [](const RunStage* a, const RunStage* b) {
    return a->tree_rss_peak != b->tree_rss_peak ? a->tree_rss_peak > b->tree_rss_peak : a < b;
  };
  std::nth_element(all.begin(), all.begin() + kMaxStagesShown, all.end(), higher);
  out.assign(all.begin(), all.begin() + kMaxStagesShown);
  std::sort(out.begin(), out.end());  // the recording's order (pointers into one vector)
  return out;
}

}  // namespace

report::Report report_of_run(const RunRecord& record) {
  report::Report report;
  const std::string command = joined(record.command);
  report.title = "memscope run: " + command;
  report.subtitle = command;
  std::string exit = std::to_string(record.exit_code);
  if (record.child_signal) exit += fmt::format(" (killed by signal {})", *record.child_signal);
  report.summary = {{"exit code", exit},
                    {"duration", seconds(record.duration)},
                    {"peak tree RSS", bytes_or_dash(record.peak_tree_rss)},
                    {"peak at", seconds(record.peak_tree_rss_t)},
                    {"processes", std::to_string(record.processes.size())},
                    {"stages", std::to_string(record.stages.size())},
                    {"sampling interval", fmt::format("{:g} ms", record.interval * 1000.0)}};
  if (record.host_total >= 0)
    report.summary.emplace_back("host memory", format_bytes(record.host_total));
  if (record.cgroup_limit >= 0) {
    report.summary.emplace_back("cgroup limit", format_bytes(record.cgroup_limit));
  }
  if (const RankSpread spread = rank_spread(record.ranks, &RunRank::peak_rss);
      spread.max != nullptr) {
    report.summary.emplace_back("ranks", std::to_string(record.ranks.size()));
    report.summary.emplace_back(
        "max peak RSS over ranks",
        fmt::format("{} (rank {})", format_bytes(spread.max->peak_rss), spread.max->rank));
  }
  report.summary.emplace_back("GPU memory",
                              record.gpu_status == "nvml" ? "watched (NVML)" : "not watched");
  report.x_label = "time since the command started (s)";
  report.notes.push_back(fmt::format(
      "RSS over time is sampled every {:g} ms; each process's peak is the kernel's VmHWM "
      "(exact), so it can be higher than any sample.",
      record.interval * 1000.0));
  if (record.gpu_status != "nvml" && !record.gpu_status.empty()) {
    report.notes.push_back("GPU memory was not watched: " + record.gpu_status);
  }
  add_run_series(record, report);

  const std::vector<const RunStage*> stages_shown = shown_stages(record);
  if (stages_shown.size() < record.stages.size()) {
    report.notes.push_back(fmt::format(
        "{} stages: the page shows the {} with the highest tree RSS peak (the recording has all).",
        record.stages.size(), stages_shown.size()));
  }
  for (const RunStage* stage : stages_shown) {
    const RunStage& s = *stage;
    const double end = s.end < 0.0 ? record.duration : s.end;
    std::string detail = fmt::format("pid {}, {}", s.pid, seconds(end - s.begin));
    if (s.tree_rss_peak >= 0) detail += ", tree RSS peak " + format_bytes(s.tree_rss_peak);
    if (s.gpu_peak >= 0) detail += ", GPU peak " + format_bytes(s.gpu_peak);
    if (s.end < 0.0) detail += ", never ended";
    report.bands.push_back({s.name, s.begin, end, detail});
  }
  if (record.peak_tree_rss >= 0 && !record.t.empty()) {
    std::string label = fmt::format("peak {} at {}", format_bytes(record.peak_tree_rss),
                                    seconds(record.peak_tree_rss_t));
    if (const RunStage* s = stage_at(record, record.peak_tree_rss_t)) {
      label += fmt::format(" (stage {})", s->name);
    }
    report.peak = report::Marker{"tree RSS (sampled)", record.peak_tree_rss_t,
                                 static_cast<double>(record.peak_tree_rss), label};
  }

  // The terminal's tables (run_summary.hpp), every process listed.
  report::Table processes = run_processes_table(record, 0);
  processes.note =
      "peak RSS from VmHWM is exact; 'sampled' is a lower bound; 'wait4: it or a "
      "reaped child' the largest of its peak and its children's";
  report.tables.push_back(std::move(processes));
  if (!record.ranks.empty()) report.tables.push_back(ranks_table(record));
  if (!record.stages.empty()) {
    report::Table stages = run_stages_table(record, stages_shown);
    stages.note =
        "tree RSS peak: the highest sample during the stage; end mark figures: the stage's own "
        "tracker";
    report.tables.push_back(std::move(stages));
  }
  return report;
}

}  // namespace memscope::cli
