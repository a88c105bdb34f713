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
#include "memscope/report_text.hpp"
#include "memscope/units.hpp"

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

struct Line {
  std::string where;  // stage or command
  std::string figure;
  bool bytes = true;
  Value a;  // none: unknown, or absent from that run
  Value b;
  [[nodiscard]] bool both() const { return a && b; }
  [[nodiscard]] double change() const { return both() ? *b - *a : 0.0; }
};

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
  return Json{{"where", l.where},
              {"figure", l.figure},
              {"unit", l.bytes ? "bytes" : "seconds"},
              {"a", v(l.a)},
              {"b", v(l.b)},
              {"change", l.both() ? Json(l.change()) : Json(nullptr)},
              {"change_pct", l.both() ? percent_json(*l.a, *l.b) : Json(nullptr)}};
}

report::TextTable make_table(const char* first) {
  return report::TextTable(
      {{first}, {"figure"}, {"A", true}, {"B", true}, {"change", true}, {"change %", true}});
}

// A verdict names no process whose peak is under this share of the runs' peak.
constexpr double kVerdictShare = 0.01;

// "python3" for "/usr/bin/python3 -u train.py", "sed" for "[sed]".
std::string program_of(const std::string& command) {
  std::string first = command.substr(0, command.find(' '));
  if (first.size() > 2 && first.front() == '[' && first.back() == ']') {
    return first.substr(1, first.size() - 2);
  }
  const std::size_t slash = first.rfind('/');
  return slash == std::string::npos ? first : first.substr(slash + 1);
}

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

// What two runs' comparison found, before it is printed: the lines of each table and where the
// verdict points (indices into `stages` and `commands`).
struct RunComparison {
  std::vector<Line> overall;  // the whole run: duration, then the tree RSS peak
  std::vector<Line> stages;
  std::vector<Line> commands;           // the largest change first
  std::vector<std::string> matched_by;  // per command: how its two processes were paired
  std::optional<std::size_t> biggest_stage;
  std::optional<std::size_t> biggest_process;
};

// Per stage matched by name and occurrence: duration, sampled tree RSS and GPU peaks, and the
// end marks' figures (deltas may be negative; they are bytes all the same).
std::vector<Line> stage_lines(const RunRecord& a, const RunRecord& b) {
  std::vector<Line> stages;
  for (const auto& [sa, sb] : match(a.stages, b.stages, [](const RunStage& s) { return s.name; })) {
    const std::string name = (sa != nullptr ? sa : sb)->name;
    stages.push_back({name, "duration", false, duration(sa), duration(sb)});
    stages.push_back({name, "tree RSS peak (sampled)", true,
                      sa ? known(sa->tree_rss_peak) : std::nullopt,
                      sb ? known(sb->tree_rss_peak) : std::nullopt});
    if ((sa && sa->gpu_peak >= 0) || (sb && sb->gpu_peak >= 0)) {
      stages.push_back({name, "GPU peak (sampled)", true, sa ? known(sa->gpu_peak) : std::nullopt,
                        sb ? known(sb->gpu_peak) : std::nullopt});
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
      stages.push_back({name, k, true, get(sa), get(sb)});
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
void add_command_lines(const RunRecord& a, const RunRecord& b, RunComparison& out) {
  std::vector<Line> commands;
  std::vector<std::string> matched_by;
  for (const ProcessPair& pair : match_processes(a, b)) {
    const RunProcess* pa = pair.a;
    const RunProcess* pb = pair.b;
    std::string where = (pb != nullptr ? pb : pa)->command;
    if (pa != nullptr && pb != nullptr && pa->command != pb->command) {
      where = pb->command + " (A: " + pa->command + ")";
    }
    commands.push_back({std::move(where), "peak RSS", true, pa ? known(pa->peak_rss) : std::nullopt,
                        pb ? known(pb->peak_rss) : std::nullopt});
    matched_by.push_back(pair.how);
  }
  std::vector<std::size_t> order(commands.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    return std::fabs(commands[x].change()) > std::fabs(commands[y].change());
  });
  for (const std::size_t i : order) {
    out.commands.push_back(commands[i]);
    out.matched_by.push_back(matched_by[i]);
  }
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

RunComparison compare_runs(const RunRecord& a, const RunRecord& b) {
  RunComparison c;
  c.overall = {
      {"run", "duration", false, a.duration, b.duration},
      {"run", "tree RSS peak (sampled)", true, known(a.peak_tree_rss), known(b.peak_tree_rss)},
  };
  c.stages = stage_lines(a, b);
  c.biggest_stage = biggest_stage(c.stages);
  add_command_lines(a, b, c);
  c.biggest_process = biggest_process(a, b, c.commands);
  return c;
}

std::string shortened(std::string command) {
  if (command.size() > 60) command = command.substr(0, 57) + "...";
  return command;
}

// "peak tree RSS +1.00 GiB (+50.0%), mostly stage train (+1.00 GiB); the process that changed
// most: python3 train.py (+1.00 GiB peak RSS)".
std::string run_verdict(const RunComparison& c) {
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
  if (c.biggest_stage && c.stages[*c.biggest_stage].change() != 0.0) {
    const Line& stage = c.stages[*c.biggest_stage];
    summary += fmt::format(", mostly stage {} ({})", stage.where,
                           signed_bytes(static_cast<std::int64_t>(stage.change())));
  }
  if (c.biggest_process) {
    const Line& process = c.commands[*c.biggest_process];
    summary +=
        fmt::format("; the process that changed most: {} ({} peak RSS)", shortened(process.where),
                    signed_bytes(static_cast<std::int64_t>(process.change())));
  }
  return summary;
}

// The tables (the first `top` rows of each; the JSON has them all) and the verdict.
DiffOutput render_run_comparison(const RunComparison& c, const DiffNames& names) {
  DiffOutput out;
  out.json = diff_json("runs", names);
  Json overall_json = Json::array();
  Json stages_json = Json::array();
  Json commands_json = Json::array();
  report::TextTable overall_table = make_table("");
  for (const Line& l : c.overall) {
    overall_table.add_row(cells(l));
    overall_json.push_back(line_json(l));
  }
  report::TextTable stage_table = make_table("stage");
  for (const Line& l : c.stages) {
    if (stage_table.rows() < names.top * 4) stage_table.add_row(cells(l));
    stages_json.push_back(line_json(l));
  }
  report::TextTable command_table({{"command"},
                                   {"figure"},
                                   {"A", true},
                                   {"B", true},
                                   {"change", true},
                                   {"change %", true},
                                   {"matched by"}});
  for (std::size_t i = 0; i < c.commands.size(); ++i) {
    const Line& l = c.commands[i];
    if (command_table.rows() < names.top) {
      std::vector<std::string> row = cells(l);
      row[0] = shortened(row[0]);
      row.push_back(c.matched_by[i]);
      command_table.add_row(std::move(row));
    }
    Json row = line_json(l);
    row["matched_by"] = c.matched_by[i];
    commands_json.push_back(std::move(row));
  }
  out.json["run"] = std::move(overall_json);
  out.json["stages"] = std::move(stages_json);
  out.json["commands"] = std::move(commands_json);
  out.summary = run_verdict(c);
  out.json["summary"] = out.summary;

  out.text = fmt::format("runs: A = {}, B = {}\n", names.a, names.b) + overall_table.render();
  if (!stage_table.empty()) out.text += "\nstages:\n" + stage_table.render(2);
  if (!command_table.empty()) {
    out.text +=
        "\nprocesses (matched by command line, else program and script, else role), the largest "
        "change first:\n" +
        command_table.render(2);
  }
  out.text += "\n" + out.summary + "\n";
  return out;
}

}  // namespace

DiffOutput diff_runs(const RunRecord& a, const RunRecord& b, const DiffNames& names) {
  return render_run_comparison(compare_runs(a, b), names);
}

}  // namespace memscope::cli
