// diff_runs (diff.hpp): two `memscope run` recordings, stage by stage and command by command.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "diff.hpp"
#include "memscope/units.hpp"
#include "text_table.hpp"

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

TextTable make_table(const char* first) {
  return TextTable(
      {{first}, {"figure"}, {"A", true}, {"B", true}, {"change", true}, {"change %", true}});
}

}  // namespace

DiffOutput diff_runs(const RunRecord& a, const RunRecord& b, const DiffNames& names) {
  DiffOutput out;
  out.json = diff_json("runs", names);

  // The whole run.
  std::vector<Line> overall = {
      {"run", "duration", false, a.duration, b.duration},
      {"run", "tree RSS peak (sampled)", true, known(a.peak_tree_rss), known(b.peak_tree_rss)},
  };

  // Stages.
  std::vector<Line> stages;
  const Line* biggest_stage = nullptr;
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
    if (sa)
      for (const auto& [k, v] : sa->metrics) keys.insert(k);
    if (sb)
      for (const auto& [k, v] : sb->metrics) keys.insert(k);
    for (const std::string& k : keys) {
      const auto get = [&](const RunStage* s) -> Value {
        if (s == nullptr) return std::nullopt;
        const auto it = s->metrics.find(k);
        return it == s->metrics.end() ? std::nullopt : Value(static_cast<double>(it->second));
      };
      // Deltas may be negative; they are bytes all the same (the end marks' figures).
      Line l{name, k, true, get(sa), get(sb)};
      stages.push_back(l);
    }
  }
  for (const Line& l : stages) {
    if (l.figure != "tree RSS peak (sampled)" || !l.both()) continue;
    if (biggest_stage == nullptr || std::fabs(l.change()) > std::fabs(biggest_stage->change())) {
      biggest_stage = &l;
    }
  }

  // Processes, by command line.
  std::vector<Line> commands;
  for (const auto& [pa, pb] :
       match(a.processes, b.processes, [](const RunProcess& p) { return p.command; })) {
    commands.push_back({(pa != nullptr ? pa : pb)->command, "peak RSS", true,
                        pa ? known(pa->peak_rss) : std::nullopt,
                        pb ? known(pb->peak_rss) : std::nullopt});
  }
  std::stable_sort(commands.begin(), commands.end(), [](const Line& x, const Line& y) {
    return std::fabs(x.change()) > std::fabs(y.change());
  });

  Json overall_json = Json::array();
  Json stages_json = Json::array();
  Json commands_json = Json::array();
  TextTable overall_table = make_table("");
  for (const Line& l : overall) {
    overall_table.add_row(cells(l));
    overall_json.push_back(line_json(l));
  }
  TextTable stage_table = make_table("stage");
  for (const Line& l : stages) {
    if (stage_table.rows() < names.top * 4) stage_table.add_row(cells(l));
    stages_json.push_back(line_json(l));
  }
  TextTable command_table = make_table("command");
  for (const Line& l : commands) {
    if (command_table.rows() < names.top) {
      std::vector<std::string> c = cells(l);
      if (c[0].size() > 60) c[0] = c[0].substr(0, 57) + "...";
      command_table.add_row(std::move(c));
    }
    commands_json.push_back(line_json(l));
  }
  out.json["run"] = std::move(overall_json);
  out.json["stages"] = std::move(stages_json);
  out.json["commands"] = std::move(commands_json);

  const Line& peak = overall[1];
  if (peak.both()) {
    const std::string pct = percent_change(*peak.a, *peak.b);
    out.summary =
        fmt::format("peak tree RSS {}{}", signed_bytes(static_cast<std::int64_t>(peak.change())),
                    pct.empty() ? "" : " (" + pct + ")");
  } else {
    out.summary = "peak tree RSS unknown in one run";
  }
  if (biggest_stage != nullptr && biggest_stage->change() != 0.0) {
    out.summary += fmt::format(", mostly stage {} ({})", biggest_stage->where,
                               signed_bytes(static_cast<std::int64_t>(biggest_stage->change())));
  }
  if (!commands.empty() && commands.front().both() && commands.front().change() != 0.0) {
    std::string command = commands.front().where;
    if (command.size() > 60) command = command.substr(0, 57) + "...";
    out.summary += fmt::format("; the process that changed most: {} ({} peak RSS)", command,
                               signed_bytes(static_cast<std::int64_t>(commands.front().change())));
  }
  out.json["summary"] = out.summary;

  out.text = fmt::format("runs: A = {}, B = {}\n", names.a, names.b) + overall_table.render();
  if (!stage_table.empty()) out.text += "\nstages:\n" + stage_table.render(2);
  if (!command_table.empty()) {
    out.text +=
        "\nprocesses by command line, the largest change first:\n" + command_table.render(2);
  }
  out.text += "\n" + out.summary + "\n";
  return out;
}

}  // namespace memscope::cli
