// diff_runs (diff.hpp): two `memscope run` recordings, stage by stage and command by command.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "diff/diff.hpp"
#include "memscope/units.hpp"
#include "run/run_helpers.hpp"

namespace memscope::cli {
namespace {

using Json = nlohmann::json;

// Items matched by name and occurrence: the second "train" stage of A with the second of B.
template <typename T, typename Name>
std::vector<std::pair<const T*, const T*>> match(const std::vector<T>& a, const std::vector<T>& b,
                                                 Name name) {
  std::map<std::pair<std::string, int>, std::pair<const T*, const T*>> pairs;
  std::vector<std::pair<std::string, int>> order;
  const auto add = [&](const std::vector<T>& items, bool first) {
    std::map<std::string, int> seen;
    for (const T& item : items) {
      const std::pair<std::string, int> key{name(item), seen[name(item)]++};
      auto [it, inserted] = pairs.try_emplace(key, nullptr, nullptr);
      if (inserted) order.push_back(key);
      (first ? it->second.first : it->second.second) = &item;
    }
  };
  add(a, true);
  add(b, false);
  std::vector<std::pair<const T*, const T*>> out;
  out.reserve(order.size());
  for (const auto& key : order) out.push_back(pairs[key]);
  return out;
}

using Value = std::optional<double>;

// -1 means unknown in a RunRecord's sizes.
Value known(std::int64_t v) {
  return v < 0 ? std::nullopt : Value(static_cast<double>(v));
}

Value duration(const RunStage* s) {
  return s == nullptr || s->end < 0 ? std::nullopt : Value(s->end - s->begin);
}

using Line = RunDiff::Line;

std::vector<std::string> cells(const Line& l) {
  const auto value = [&](const Value& v) -> std::string {
    if (!v) return "-";
    return l.bytes ? format_bytes(static_cast<std::int64_t>(*v)) : fmt::format("{:.3f} s", *v);
  };
  std::string change;
  if (l.both()) {
    change = l.bytes ? signed_bytes(static_cast<std::int64_t>(l.change()))
                     : fmt::format("{:+.3f} s", l.change());
  }
  return {l.where,    l.figure, value(l.a),
          value(l.b), change,   l.both() ? percent_change(*l.a, *l.b) : ""};
}

Json line_json(const Line& l) {
  const auto v = [](const Value& x) { return x ? Json(*x) : Json(nullptr); };
  Json out{{"where", l.where},
           {"figure", l.figure},
           {"unit", l.bytes ? "bytes" : "seconds"},
           {"a", v(l.a)},
           {"b", v(l.b)},
           {"change", l.both() ? Json(l.change()) : Json(nullptr)},
           {"change_pct", l.both() ? percent_json(*l.a, *l.b) : Json(nullptr)}};
  if (!l.matched_by.empty()) out["matched_by"] = l.matched_by;
  return out;
}

Json lines_json(const std::vector<Line>& lines) {
  Json out = Json::array();
  for (const Line& l : lines) out.push_back(line_json(l));
  return out;
}

// The first `top` lines as a table (none: all of them).
report::Table lines_table(std::string title, const char* first, const std::vector<Line>& lines,
                          std::optional<std::size_t> top) {
  report::Table t{std::move(title),
                  {first, "figure", "A", "B", "change", "change %"},
                  {false, false, true, true, true, true},
                  {},
                  {}};
  for (const Line& l : lines) {
    if (top && t.rows.size() == *top) break;
    t.rows.push_back(cells(l));
  }
  return t;
}

// A verdict names no process whose peak is under this share of the runs' peak.
constexpr double kVerdictShare = 0.01;

// The program and what it runs: "python3 train.py" for "/usr/bin/python3 -u /x/train.py
// --lr 3", "python3 -m torch.distributed.run" for "python -m torch.distributed.run ..."; the
// program alone when it has no such argument.
std::string program_and_script(const std::string& command) {
  std::string key = program_of(command);
  std::size_t at = command.find(' ');
  bool module = false;
  while (at != std::string::npos) {
    const std::size_t begin = at + 1;
    at = command.find(' ', begin);
    const std::string word = command.substr(begin, at == std::string::npos ? at : at - begin);
    if (word.empty()) continue;
    if (word == "-m") {
      module = true;
      continue;
    }
    if (word.front() == '-') continue;
    const std::size_t slash = word.rfind('/');
    return key + (module ? " -m " : " ") +
           (slash == std::string::npos ? word : word.substr(slash + 1));
  }
  return key;
}

struct ProcessPair {
  const RunProcess* a = nullptr;
  const RunProcess* b = nullptr;
  std::string how;  // "command line", "program and script", "the command", "rank 3", ...
};

// Pairs the processes of two runs in passes, each over what is still unpaired, by a key and its
// occurrence (the second "worker" of A with the second of B): the command line; the program and
// script; the role: the run's command itself, the rank of a distributed job, the program.
// Unpaired processes are listed alone, A's before B's.
std::vector<ProcessPair> match_processes(const RunRecord& a, const RunRecord& b) {
  using Key = std::function<std::optional<std::string>(const RunRecord&, std::size_t)>;
  const std::vector<std::pair<Key, std::string>> passes{
      {[](const RunRecord& r, std::size_t i) { return std::optional(r.processes[i].command); },
       "command line"},
      {[](const RunRecord& r, std::size_t i) {
         return std::optional(program_and_script(r.processes[i].command));
       },
       "program and script"},
      {[](const RunRecord&, std::size_t i) {
         return i == 0 ? std::optional<std::string>("") : std::nullopt;
       },
       "the command"},
      {[](const RunRecord& r, std::size_t i) -> std::optional<std::string> {
         const std::optional<int> rank = r.processes[i].rank.rank;
         return rank ? std::optional(std::to_string(*rank)) : std::nullopt;
       },
       "rank"},
      {[](const RunRecord& r, std::size_t i) {
         return std::optional(program_of(r.processes[i].command));
       },
       "program"}};
  std::vector<std::optional<std::size_t>> partner(a.processes.size());
  std::vector<bool> taken(b.processes.size(), false);
  std::vector<std::string> how(a.processes.size());
  for (const auto& [key, name] : passes) {
    // Unpaired processes of B by (key, occurrence).
    std::map<std::pair<std::string, int>, std::size_t> in_b;
    std::map<std::string, int> seen;
    for (std::size_t j = 0; j < b.processes.size(); ++j) {
      if (taken[j]) continue;
      if (const std::optional<std::string> k = key(b, j)) {
        in_b.emplace(std::pair(*k, seen[*k]++), j);
      }
    }
    seen.clear();
    for (std::size_t i = 0; i < a.processes.size(); ++i) {
      if (partner[i]) continue;
      const std::optional<std::string> k = key(a, i);
      if (!k) continue;
      const auto it = in_b.find({*k, seen[*k]++});
      if (it == in_b.end()) continue;
      partner[i] = it->second;
      taken[it->second] = true;
      how[i] = name == "rank" ? "rank " + *k : name;
    }
  }
  std::vector<ProcessPair> out;
  for (std::size_t i = 0; i < a.processes.size(); ++i) {
    out.push_back({&a.processes[i], partner[i] ? &b.processes[*partner[i]] : nullptr,
                   partner[i] ? how[i] : "only in A"});
  }
  for (std::size_t j = 0; j < b.processes.size(); ++j) {
    if (!taken[j]) out.push_back({nullptr, &b.processes[j], "only in B"});
  }
  return out;
}

// Per stage matched by name and occurrence: duration, sampled tree RSS and GPU peaks, and the
// end marks' figures (deltas may be negative; they are bytes all the same).
std::vector<Line> stage_lines(const RunRecord& a, const RunRecord& b) {
  std::vector<Line> stages;
  for (const auto& [sa, sb] : match(a.stages, b.stages, [](const RunStage& s) { return s.name; })) {
    const std::string name = (sa != nullptr ? sa : sb)->name;
    stages.push_back({name, "duration", false, duration(sa), duration(sb), {}});
    stages.push_back({name,
                      "tree RSS peak (sampled)",
                      true,
                      sa ? known(sa->tree_rss_peak) : std::nullopt,
                      sb ? known(sb->tree_rss_peak) : std::nullopt,
                      {}});
    if ((sa && sa->gpu_peak >= 0) || (sb && sb->gpu_peak >= 0)) {
      stages.push_back({name,
                        "GPU peak (sampled)",
                        true,
                        sa ? known(sa->gpu_peak) : std::nullopt,
                        sb ? known(sb->gpu_peak) : std::nullopt,
                        {}});
    }
    std::set<std::string> keys;
    for (const RunStage* s : {sa, sb}) {
      if (s == nullptr) continue;
      for (const auto& [k, v] : s->metrics) keys.insert(k);
    }
    for (const std::string& k : keys) {
      const auto get = [&](const RunStage* s) -> Value {
        if (s == nullptr) return std::nullopt;
        const auto it = s->metrics.find(k);
        return it == s->metrics.end() ? std::nullopt : Value(static_cast<double>(it->second));
      };
      stages.push_back({name, k, true, get(sa), get(sb), {}});
    }
  }
  return stages;
}

// The stage whose sampled tree RSS peak changed most.
std::optional<std::size_t> biggest_stage(const std::vector<Line>& stages) {
  std::optional<std::size_t> biggest;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const Line& l = stages[i];
    if (l.figure != "tree RSS peak (sampled)" || !l.both()) continue;
    if (!biggest || std::fabs(l.change()) > std::fabs(stages[*biggest].change())) biggest = i;
  }
  return biggest;
}

// Processes: by command line, then program and script, then role (the command itself, a rank,
// the n-th run of a program), so a renamed script still meets its old self; the largest change
// first.
std::vector<Line> command_lines(const RunRecord& a, const RunRecord& b) {
  std::vector<Line> commands;
  for (const ProcessPair& pair : match_processes(a, b)) {
    const RunProcess* pa = pair.a;
    const RunProcess* pb = pair.b;
    std::string where = (pb != nullptr ? pb : pa)->command;
    if (pa != nullptr && pb != nullptr && pa->command != pb->command) {
      where = pb->command + " (A: " + pa->command + ")";
    }
    commands.push_back({std::move(where), "peak RSS", true, pa ? known(pa->peak_rss) : std::nullopt,
                        pb ? known(pb->peak_rss) : std::nullopt, pair.how});
  }
  std::stable_sort(commands.begin(), commands.end(), [](const Line& x, const Line& y) {
    return std::fabs(x.change()) > std::fabs(y.change());
  });
  return commands;
}

// A verdict never names a process under 1% of the peak (a shim's few KiB): the largest change
// among the processes that matter.
std::optional<std::size_t> biggest_process(const RunRecord& a, const RunRecord& b,
                                           const std::vector<Line>& commands) {
  std::int64_t peak_of_runs = std::max(a.peak_tree_rss, b.peak_tree_rss);
  for (const RunRecord* r : {&a, &b}) {
    for (const RunProcess& p : r->processes) peak_of_runs = std::max(peak_of_runs, p.peak_rss);
  }
  for (std::size_t i = 0; i < commands.size(); ++i) {
    const Line& l = commands[i];
    if (!l.both() || l.change() == 0.0) continue;
    if (std::max(*l.a, *l.b) < kVerdictShare * static_cast<double>(peak_of_runs)) continue;
    return i;
  }
  return std::nullopt;
}

std::string shortened(std::string command) {
  if (command.size() > 60) command = command.substr(0, 57) + "...";
  return command;
}

// "peak tree RSS +1.00 GiB (+50.0%), mostly stage train (+1.00 GiB); the process that changed
// most: python3 train.py (+1.00 GiB peak RSS)".
std::string run_verdict(const RunRecord& a, const RunRecord& b, const RunDiff& c) {
  std::string summary;
  const Line& peak = c.overall[1];
  if (peak.both()) {
    const std::string pct = percent_change(*peak.a, *peak.b);
    summary =
        fmt::format("peak tree RSS {}{}", signed_bytes(static_cast<std::int64_t>(peak.change())),
                    pct.empty() ? "" : " (" + pct + ")");
  } else {
    summary = "peak tree RSS unknown in one run";
  }
  const std::optional<std::size_t> stage_index = biggest_stage(c.stages);
  if (stage_index && c.stages[*stage_index].change() != 0.0) {
    const Line& stage = c.stages[*stage_index];
    summary += fmt::format(", mostly stage {} ({})", stage.where,
                           signed_bytes(static_cast<std::int64_t>(stage.change())));
  }
  if (const auto process_index = biggest_process(a, b, c.commands)) {
    const Line& process = c.commands[*process_index];
    summary +=
        fmt::format("; the process that changed most: {} ({} peak RSS)", shortened(process.where),
                    signed_bytes(static_cast<std::int64_t>(process.change())));
  }
  return summary;
}

}  // namespace

RunDiff diff_runs(const RunRecord& a, const RunRecord& b, const DiffNames& names) {
  RunDiff c;
  c.names = names;
  c.overall = {
      {"run", "duration", false, a.duration, b.duration, {}},
      {"run", "tree RSS peak (sampled)", true, known(a.peak_tree_rss), known(b.peak_tree_rss), {}},
  };
  c.stages = stage_lines(a, b);
  c.commands = command_lines(a, b);
  c.summary = run_verdict(a, b, c);
  return c;
}

// The tables (the first `top` rows of each; the JSON has them all) and the verdict.
report::Report RunDiff::to_report() const {
  report::Report report;
  report.title = fmt::format("runs: A = {}, B = {}", names.a, names.b);
  report.tables.push_back(lines_table("the whole run", "", overall, std::nullopt));
  if (!stages.empty())
    report.tables.push_back(lines_table("stages", "stage", stages, names.top * 4));
  if (!commands.empty()) {
    report::Table t{
        "processes (matched by command line, else program and script, else role), "
        "the largest change first",
        {"command", "figure", "A", "B", "change", "change %", "matched by"},
        {false, false, true, true, true, true, false},
        {},
        more_note(commands.size(), names.top, "processes")};
    for (const Line& l : commands) {
      if (t.rows.size() == names.top) break;
      std::vector<std::string> row = cells(l);
      row[0] = shortened(row[0]);
      row.push_back(l.matched_by);
      t.rows.push_back(std::move(row));
    }
    report.tables.push_back(std::move(t));
  }
  report.notes.push_back(summary);
  return report;
}

nlohmann::json RunDiff::to_json() const {
  Json out = diff_json("runs", names, summary);
  out["run"] = lines_json(overall);
  out["stages"] = lines_json(stages);
  out["commands"] = lines_json(commands);
  return out;
}

}  // namespace memscope::cli
