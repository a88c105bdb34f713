// Reports of saved metrics and of a saved estimate (report_builders.hpp); a run's is beside the
// run (run/run_report.cpp), a replay's the library's (memscope/replay_report.hpp), the Report's
// JSON report_json.cpp.
#include "report/report_builders.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "memscope/json_envelope.hpp"
#include "memscope/json_reader.hpp"
#include "memscope/metrics.hpp"
#include "memscope/units.hpp"

namespace memscope::cli {

report::Report report_of_metrics(const Metrics& metrics, const std::string& source,
                                 std::size_t max_rows) {
  report::Report report;
  report.title = "memscope report: " + source;
  report.subtitle = source;
  const std::map<std::string, std::string> text = metrics_format(metrics);
  // One table per stage: the text before the key's first '_' ("train_mem_cpu_alloc_delta" is
  // train's), as format_metrics_table groups them.
  std::map<std::string, report::Table> by_stage;
  std::map<std::string, std::size_t> keys_of;  // every stage's keys, shown or not
  std::size_t shown = 0;
  for (const auto& [key, value] : text) {
    const std::size_t cut = key.find('_');
    std::string stage = cut == std::string::npos ? std::string() : key.substr(0, cut);
    if (stage == "before") stage = "init";  // before_init_mem_cpu goes with init
    ++keys_of[stage];
    if (shown == max_rows) continue;
    ++shown;
    report::Table& t = by_stage[stage];
    if (t.columns.empty()) {
      t.title = stage.empty() ? std::string("other metrics") : stage;
      t.columns = {"metric", "value"};
      t.numeric = {false, true};
    }
    t.rows.push_back({key, value});
  }
  report.summary = {{"metrics", std::to_string(metrics.size())},
                    {"stages", std::to_string(keys_of.size())}};
  for (auto& [stage, table] : by_stage) {
    const std::size_t keys = keys_of[stage];
    if (table.rows.size() < keys) {
      table.note = fmt::format(
          "The first {} of its {} keys; memscope report without --html prints "
          "them all.",
          table.rows.size(), keys);
    }
    report.tables.push_back(std::move(table));
  }
  if (shown < metrics.size()) {
    report.notes.push_back(fmt::format(
        "The page shows the first {} of {} keys ({} of {} stages); memscope report without "
        "--html prints them all.",
        shown, metrics.size(), by_stage.size(), keys_of.size()));
  }
  return report;
}

report::Report report_of_estimate(const nlohmann::json& json, const std::string& source) {
  const report::JsonSource file(source,
                                "a memscope estimate, written by 'memscope estimate --json'");
  const report::JsonObject saved(file, json, "");
  (void)report::read_envelope(saved, "estimate", kEstimateFormatVersion);
  const report::JsonObject e = saved.object("estimate");
  report::Report report;
  report.title = "memscope estimate: " + source;
  report.subtitle = source;
  const bool fits = e.boolean("fits");
  const std::int64_t peak = e.integer("peak_allocated");
  report.summary = {
      {"batch", std::to_string(e.integer("batch"))},
      {"steps", std::to_string(e.integer("steps"))},
      {"device", e.text("device")},
      {"peak allocated (last step)", format_bytes(peak)},
      {"peak reserved", format_bytes(e.integer("peak_reserved"))},
      {"capacity", format_bytes(e.integer("capacity")) +
                       (fits ? "  fits" : "  DOES NOT FIT (out of memory in the replay)")},
  };
  if (!e.text("config").empty()) report.summary.emplace_back("settings", e.text("config"));
  if (saved.has("max_batch")) {
    report.summary.emplace_back("largest batch",
                                std::to_string(saved.object("max_batch").integer("batch")));
  }
  auto share = [peak](std::int64_t n) {
    return fmt::format("{:.1f}%", 100.0 * static_cast<double>(n) /
                                      static_cast<double>(std::max<std::int64_t>(1, peak)));
  };
  report::Table categories{"live at the last step's peak, by category",
                           {"category", "bytes", "share"},
                           {false, true, true},
                           {},
                           {}};
  for (const auto& [name, n] : e.integer_map("by_category")) {
    if (n != 0) categories.rows.push_back({name, format_bytes(n), share(n)});
  }
  report.tables.push_back(std::move(categories));
  report::Table modules{"by module (forward allocations; others by phase)",
                        {"module", "bytes", "share"},
                        {false, true, true},
                        {},
                        {}};
  for (const nlohmann::json& m : e.array("top_modules")) {
    if (!m.is_array() || m.size() != 2 || !m[0].is_string() || !m[1].is_number_integer()) {
      e.fail("top_modules", "each entry must be [module, bytes]");
    }
    const auto n = m[1].get<std::int64_t>();
    modules.rows.push_back({m[0].get<std::string>(), format_bytes(n), share(n)});
  }
  report.tables.push_back(std::move(modules));
  for (const std::string& line : e.texts("not_modeled"))
    report.notes.push_back("not modelled: " + line);
  return report;
}

}  // namespace memscope::cli
