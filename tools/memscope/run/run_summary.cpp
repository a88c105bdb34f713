#include "run/run_summary.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "memscope/report.hpp"
#include "memscope/report_text.hpp"
#include "memscope/run_ranks.hpp"
#include "memscope/units.hpp"
#include "run/run_helpers.hpp"

namespace memscope::cli {
namespace {

constexpr std::size_t kCommandWidth = 48;
constexpr std::size_t kMaxProcessRows = 40;

std::string seconds_text(double seconds) {
  if (seconds < 0) return "-";
  if (seconds < 10) return fmt::format("{:.2f} s", seconds);
  if (seconds < 600) return fmt::format("{:.1f} s", seconds);
  return fmt::format("{:.1f} min", seconds / 60);
}

std::string exit_text(const RunProcess& p) {
  if (p.exit_signal) return fmt::format("signal {}", *p.exit_signal);
  if (p.exit_code) return std::to_string(*p.exit_code);
  return p.end < 0 ? "running" : "-";  // reaped by its own parent: memscope never saw the code
}

// The end mark's figures: "cpu_peaked_delta 1.21 GiB, gpu_alloc_delta 0 B".
std::string metrics_text(const RunStage& stage) {
  std::string text;
  for (const auto& [name, value] : stage.metrics) {
    if (!text.empty()) text += ", ";
    text += name + " " + format_bytes(value);
  }
  return text.empty() ? "-" : text;
}

}  // namespace

report::Table run_processes_table(const RunRecord& record, std::size_t max_rows) {
  const double run_end = record.duration;
  const bool gpu = !record.tree_gpu.empty();
  std::vector<report::TextTable::Column> columns{
      {"pid", true},   {"command", false}, {"peak RSS", true}, {"source", false},
      {"start", true}, {"lifetime", true}, {"exit", true}};
  if (gpu) columns.insert(columns.begin() + 4, report::TextTable::Column{"peak GPU", true});
  report::TextTable table(columns);
  // Short-lived helpers (shims, shell utilities) take one row (run_helpers.hpp).
  const std::vector<bool> helpers = short_lived_helpers(record);
  const HelperRow collapsed = helper_row(record, helpers);
  // A run with hundreds of short-lived processes (shell helpers, data loader restarts) lists the
  // command and the ones with the largest peaks, in order of appearance; the JSON has them all.
  const std::size_t rows = record.processes.size() - collapsed.count;
  std::int64_t shown_from = -1;
  if (max_rows != 0 && rows > max_rows) {
    std::vector<std::int64_t> peaks;
    for (std::size_t i = 0; i < record.processes.size(); ++i) {
      if (!helpers[i]) peaks.push_back(record.processes[i].peak_rss);
    }
    std::nth_element(peaks.begin(), peaks.begin() + static_cast<std::ptrdiff_t>(max_rows - 1),
                     peaks.end(), std::greater<>());
    shown_from = peaks[max_rows - 1];
  }
  std::size_t shown = 0;
  for (std::size_t i = 0; i < record.processes.size(); ++i) {
    const RunProcess& p = record.processes[i];
    if (helpers[i]) {
      if (i != collapsed.first) continue;
      std::vector<std::string> row{
          "-",
          shorten_command(collapsed.command, 2 * kCommandWidth),
          bytes_or_dash(collapsed.peak_rss),
          "largest",
          seconds_text(collapsed.start),
          "< " + seconds_text(kHelperLifetime) + " each",
          collapsed.failed == 0 ? "0" : fmt::format("{} not 0", collapsed.failed)};
      if (gpu) row.insert(row.begin() + 4, "-");
      table.add_row(std::move(row));
      continue;
    }
    const bool the_command = i == 0;  // always listed
    if (!the_command && (p.peak_rss < shown_from || (max_rows != 0 && shown >= max_rows))) continue;
    ++shown;
    const double end = p.end < 0 ? run_end : p.end;
    std::vector<std::string> row{std::to_string(p.pid),
                                 shorten_command(p.command, kCommandWidth),
                                 bytes_or_dash(p.peak_rss),
                                 p.peak_rss_source,
                                 seconds_text(p.start),
                                 seconds_text(end - p.start),
                                 exit_text(p)};
    if (gpu) row.insert(row.begin() + 4, p.peak_gpu < 0 ? "-" : format_bytes(p.peak_gpu));
    table.add_row(std::move(row));
  }
  report::Table out = table.table();
  out.title = "Processes";
  return out;
}

namespace {

std::string processes_text(const RunRecord& record) {
  const report::Table table = run_processes_table(record, kMaxProcessRows);
  const HelperRow collapsed = helper_row(record, short_lived_helpers(record));
  const std::size_t rows = record.processes.size() - collapsed.count;
  const std::size_t shown = table.rows.size() - (collapsed.count > 0 ? 1 : 0);
  std::string text = report::render_text(table, {.indent = 2});
  if (shown < rows) {
    text += fmt::format("  ... and {} more with smaller peaks (all of them are in --json)\n",
                        rows - shown);
  }
  if (collapsed.count > 0) {
    text += fmt::format(
        "  (the {} short-lived helpers each lived under {:g} s and peaked under {:g}% of the "
        "tree's peak; every one is in --json)\n",
        collapsed.count, kHelperLifetime, kHelperShare * 100);
  }
  return text;
}

}  // namespace

report::Table run_stages_table(const RunRecord& record,
                               const std::vector<const RunStage*>& stages) {
  const bool gpu = !record.tree_gpu.empty();
  std::vector<report::TextTable::Column> columns{
      {"stage", false},   {"pid", true},           {"begin", true},
      {"duration", true}, {"tree RSS peak", true}, {"end mark figures", false}};
  if (gpu) columns.insert(columns.begin() + 5, report::TextTable::Column{"tree GPU peak", true});
  // In a distributed job, which rank ran each stage (by the pid that marked it).
  std::map<int, int> rank_of;
  for (const RunRank& r : record.ranks) {
    for (const int pid : r.pids) rank_of.emplace(pid, r.rank);
  }
  if (!rank_of.empty())
    columns.insert(columns.begin() + 2, report::TextTable::Column{"rank", true});
  report::TextTable table(columns);
  for (const RunStage* stage : stages) {
    const RunStage& s = *stage;
    std::vector<std::string> row{s.name,
                                 std::to_string(s.pid),
                                 seconds_text(s.begin),
                                 s.end < 0 ? "not ended" : seconds_text(s.end - s.begin),
                                 s.tree_rss_peak < 0 ? "no sample" : format_bytes(s.tree_rss_peak),
                                 metrics_text(s)};
    if (gpu) row.insert(row.begin() + 5, s.gpu_peak < 0 ? "no sample" : format_bytes(s.gpu_peak));
    if (!rank_of.empty()) {
      const auto it = rank_of.find(s.pid);
      row.insert(row.begin() + 2, it == rank_of.end() ? "-" : std::to_string(it->second));
    }
    table.add_row(std::move(row));
  }
  report::Table out = table.table();
  out.title = "Stages";
  return out;
}

namespace {

std::string optional_text(const std::optional<int>& value) {
  return value ? std::to_string(*value) : "-";
}

std::string joined_stages(const std::vector<std::string>& stages) {
  std::string text;
  for (const std::string& s : stages) text += (text.empty() ? "" : ", ") + s;
  return text.empty() ? "-" : shorten_command(text, kCommandWidth);
}

// "Peak RSS over ranks: max 262 MiB (rank 3), min ..." ("" when no rank knows the figure).
std::string spread_line(const std::vector<RunRank>& ranks, const char* what,
                        std::int64_t RunRank::*figure) {
  const RankSpread spread = rank_spread(ranks, figure);
  if (spread.known == 0) return {};
  return fmt::format(
      "{} over ranks: max {} (rank {}), min {} (rank {}), mean {} ({} of {} ranks)\n", what,
      format_bytes(spread.max->*figure), spread.max->rank, format_bytes(spread.min->*figure),
      spread.min->rank, format_bytes(spread.mean), spread.known, ranks.size());
}

}  // namespace

report::Table run_ranks_table(const RunRecord& record) {
  const std::vector<RunRank>& ranks = record.ranks;
  const bool gpu = !record.tree_gpu.empty();
  const bool shared =
      std::any_of(ranks.begin(), ranks.end(), [](const RunRank& r) { return r.pids.size() > 1; });
  // Columns appear only where they say something: GPU when watched, a rank's own process and
  // the upper bound when some rank has more than one process.
  std::vector<report::TextTable::Column> columns{
      {"rank", true}, {"local", true}, {"pid", true}, {"peak RSS", true}, {"source", false}};
  if (gpu) columns.push_back({"peak GPU", true});
  columns.push_back({"processes", true});
  if (shared) {
    columns.push_back({"own process", true});
    columns.push_back({"sum of peaks", true});
  }
  columns.push_back({"stages", false});
  report::TextTable table(columns);
  for (const RunRank& r : ranks) {
    std::vector<std::string> row{std::to_string(r.rank), optional_text(r.local_rank),
                                 std::to_string(r.pid), bytes_or_dash(r.peak_rss),
                                 r.peak_rss_source};
    if (gpu) row.push_back(bytes_or_dash(r.peak_gpu));
    row.push_back(std::to_string(r.pids.size()));
    if (shared) {
      row.push_back(bytes_or_dash(r.own_peak_rss));
      row.push_back(bytes_or_dash(r.sum_of_peaks));
    }
    row.push_back(joined_stages(r.stages));
    table.add_row(std::move(row));
  }
  report::Table out = table.table();
  out.title = "Ranks";
  return out;
}

namespace {

std::string ranks_text(const RunRecord& record) {
  const std::vector<RunRank>& ranks = record.ranks;
  const bool gpu = !record.tree_gpu.empty();
  const bool shared =
      std::any_of(ranks.begin(), ranks.end(), [](const RunRank& r) { return r.pids.size() > 1; });
  std::string variables;
  for (const RunRank& r : ranks) {
    if (variables.find(r.variable) == std::string::npos)
      variables += (variables.empty() ? "" : ", ") + r.variable;
  }
  std::string text = fmt::format("\nRanks (from each process's environment: {})\n", variables);
  text += report::render_text(run_ranks_table(record), {.indent = 2});
  text += spread_line(ranks, "Peak RSS", &RunRank::peak_rss);
  if (gpu) text += spread_line(ranks, "Peak GPU", &RunRank::peak_gpu);
  const std::optional<int> world = ranks.front().world_size;
  if (world && static_cast<std::size_t>(*world) > ranks.size()) {
    text += fmt::format("{} of the job's {} ranks ran under memscope (the others ran elsewhere)\n",
                        ranks.size(), *world);
  }
  if (shared) {
    text +=
        "A rank's processes are its own and its children, which inherit its rank (DataLoader "
        "workers...). With more than one, its peak RSS is the larger of its own process's "
        "peak and the highest sample of their summed RSS (a lower bound: they peak at "
        "different times); \"sum of peaks\" adds each process's own peak (an upper bound).\n";
  }
  return text;
}

}  // namespace

std::string shorten_command(const std::string& full, std::size_t width) {
  if (report::display_width(full) <= width || width < 8) return full;
  // The program's folder tells least: "/root/.pyenv/versions/3.11.7/bin/python3 demo.py" is
  // "python3 demo.py", so the script it runs is not cut away for the interpreter's path.
  const std::size_t space = full.find(' ');
  const std::string_view first = std::string_view(full).substr(0, space);
  std::string command =  // not const: returned by move
      first.find('/') == std::string_view::npos || first.front() == '['
          ? full
          : program_of(first) + (space == std::string::npos ? "" : full.substr(space));
  if (report::display_width(command) <= width) return command;
  // Keep the program and the end of the arguments, which tell runs apart; cut on a code point.
  std::size_t head = 0;
  for (std::size_t points = 0; head < command.size() && points < width / 2; ++head) {
    if ((static_cast<unsigned char>(command[head]) & 0xC0U) != 0x80U) ++points;
  }
  while (head < command.size() && (static_cast<unsigned char>(command[head]) & 0xC0U) == 0x80U) {
    ++head;
  }
  std::size_t tail = command.size();
  for (std::size_t points = 0; tail > head && points < width - width / 2 - 3;) {
    --tail;
    if ((static_cast<unsigned char>(command[tail]) & 0xC0U) != 0x80U) ++points;
  }
  return command.substr(0, head) + "..." + command.substr(tail);
}

std::string bytes_or_dash(std::int64_t bytes) {
  return bytes < 0 ? "-" : format_bytes(bytes);
}

std::string format_run_summary(const RunRecord& record) {
  std::string out;
  std::string exit = record.child_signal ? fmt::format("killed by signal {} (exit {})",
                                                       *record.child_signal, record.exit_code)
                                         : fmt::format("exit {}", record.exit_code);
  out += fmt::format("memscope run: {} after {}; {} process{} watched\n", exit,
                     seconds_text(record.duration), record.processes.size(),
                     record.processes.size() == 1 ? "" : "es");
  out += "\nProcesses\n" + processes_text(record);
  if (!record.ranks.empty()) out += ranks_text(record);
  if (!record.stages.empty()) {
    std::vector<const RunStage*> all;
    all.reserve(record.stages.size());
    for (const RunStage& s : record.stages) all.push_back(&s);
    out += "\nStages\n" + report::render_text(run_stages_table(record, all), {.indent = 2});
  }
  const RunStage* peak_stage = stage_at(record, record.peak_tree_rss_t);
  out += fmt::format("\nTree peak: {} at {}{} (the sum of the tree's RSS, sampled every {:g} ms)\n",
                     bytes_or_dash(record.peak_tree_rss), seconds_text(record.peak_tree_rss_t),
                     peak_stage != nullptr
                         ? fmt::format(", in stage {} (pid {})", peak_stage->name, peak_stage->pid)
                         : std::string(),
                     record.interval * 1000);
  out +=
      "Per-process peaks are the kernel's own (VmHWM, or ru_maxrss from wait4 for processes "
      "memscope reaped), not sampled; \"sampled\" marks a process that ended between two "
      "samples (a lower bound), \"marks\" a peak its tracker reported, \"wait4: it or a "
      "reaped child\" wait4's figure for a process that reaped children and no sample saw "
      "(the largest of its peak and theirs).\n";
  out += fmt::format("GPU: {}\n", record.gpu_status == "nvml"
                                      ? "per-process and device memory from NVML, sampled"
                                      : record.gpu_status);
  for (const std::string& note : record.notes) out += "Note: " + note + "\n";
  return out;
}

}  // namespace memscope::cli
