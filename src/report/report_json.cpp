// A Report as JSON and back (report_json.hpp): {"format": "memscope-report", "version": 1}
// and every field of report.hpp under its own name. Doubles are written with enough
// digits to read back the same number; a non-finite one is written as null and read as NaN.
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "memscope/json_envelope.hpp"
#include "memscope/json_reader.hpp"
#include "memscope/report.hpp"
#include "memscope/report_json.hpp"

namespace memscope::report {

namespace {

constexpr int kVersion = 1;

nlohmann::json number(double v) {
  if (!std::isfinite(v)) return nullptr;
  return v;
}

nlohmann::json numbers(const std::vector<double>& values) {
  nlohmann::json out = nlohmann::json::array();
  for (const double v : values) out.push_back(number(v));
  return out;
}

Series read_series(const JsonObject& j) {
  Series s;
  s.name = j.text("name");
  s.t = j.numbers_or_nan("t");
  s.bytes = j.numbers_or_nan("bytes");
  if (s.bytes.size() != s.t.size()) j.fail("bytes", "must be as long as " + j.path_of("t"));
  s.sampled = j.boolean("sampled");
  s.step = j.boolean("step");
  // Newer than the format's first version: absent means a solid line.
  s.dashed = j.json().contains("dashed") && j.boolean("dashed");
  s.unit = j.text("unit");
  return s;
}

SegmentMap read_segment_map(const JsonObject& j) {
  SegmentMap map;
  map.title = j.text("title");
  for (const JsonObject& sj : j.objects("segments")) {
    SegmentMap::Segment seg;
    seg.address = sj.unsigned_integer("address");
    seg.size = sj.unsigned_integer("size");
    seg.label = sj.text("label");
    for (const JsonObject& bj : sj.objects("blocks")) {
      seg.blocks.push_back({bj.unsigned_integer("offset"), bj.unsigned_integer("size"),
                            bj.text("state"), bj.text("label")});
    }
    map.segments.push_back(std::move(seg));
  }
  return map;
}

Table read_table(const JsonObject& j) {
  Table t;
  t.title = j.text("title");
  t.columns = j.texts("columns");
  const nlohmann::json& numeric = j.array("numeric");
  for (std::size_t i = 0; i < numeric.size(); ++i) {
    if (!numeric[i].is_boolean()) {
      j.source().fail(json_element_path(j.path_of("numeric"), i), "must be true or false");
    }
    t.numeric.push_back(numeric[i].get<bool>());
  }
  const nlohmann::json& rows = j.array("rows");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    t.rows.push_back(j.source().texts(rows[i], json_element_path(j.path_of("rows"), i)));
  }
  t.note = j.text("note");
  return t;
}

}  // namespace

nlohmann::json segment_map_to_json(const SegmentMap& map) {
  nlohmann::json segments = nlohmann::json::array();
  for (const SegmentMap::Segment& seg : map.segments) {
    nlohmann::json blocks = nlohmann::json::array();
    for (const SegmentMap::Block& b : seg.blocks) {
      blocks.push_back(
          {{"offset", b.offset}, {"size", b.size}, {"state", b.state}, {"label", b.label}});
    }
    segments.push_back({{"address", seg.address},
                        {"size", seg.size},
                        {"label", seg.label},
                        {"blocks", std::move(blocks)}});
  }
  return {{"title", map.title}, {"segments", std::move(segments)}};
}

nlohmann::json report_to_json(const Report& report) {
  nlohmann::json j = envelope("report", kVersion);
  j["title"] = report.title;
  j["subtitle"] = report.subtitle;
  nlohmann::json summary = nlohmann::json::array();
  for (const auto& [key, value] : report.summary) summary.push_back({key, value});
  j["summary"] = std::move(summary);
  j["x_label"] = report.x_label;
  j["y_label"] = report.y_label;
  nlohmann::json series = nlohmann::json::array();
  for (const Series& s : report.series) {
    series.push_back({{"name", s.name},
                      {"t", numbers(s.t)},
                      {"bytes", numbers(s.bytes)},
                      {"sampled", s.sampled},
                      {"step", s.step},
                      {"dashed", s.dashed},
                      {"unit", s.unit}});
  }
  j["series"] = std::move(series);
  nlohmann::json bands = nlohmann::json::array();
  for (const Band& b : report.bands) {
    bands.push_back({{"label", b.label},
                     {"begin", number(b.begin)},
                     {"end", number(b.end)},
                     {"detail", b.detail}});
  }
  j["bands"] = std::move(bands);
  j["peak"] = nullptr;
  if (report.peak) {
    j["peak"] = {{"series", report.peak->series},
                 {"t", number(report.peak->t)},
                 {"bytes", number(report.peak->bytes)},
                 {"label", report.peak->label}};
  }
  j["segment_map"] = nullptr;
  if (report.segment_map) {
    j["segment_map"] = segment_map_to_json(*report.segment_map);
  }
  nlohmann::json tables = nlohmann::json::array();
  for (const Table& t : report.tables) {
    tables.push_back({{"title", t.title},
                      {"columns", t.columns},
                      {"numeric", t.numeric},
                      {"rows", t.rows},
                      {"note", t.note}});
  }
  j["tables"] = std::move(tables);
  j["notes"] = report.notes;
  return j;
}

Report report_from_json(const nlohmann::json& json, const std::string& source) {
  const JsonSource file(source, "a memscope report");
  return report_from_json(JsonObject(file, json, ""));
}

Report report_from_json(const JsonObject& r) {
  const nlohmann::json& json = r.json();
  (void)read_envelope(r, "report", kVersion);
  Report report;
  report.title = r.text("title");
  report.subtitle = r.text("subtitle");
  const nlohmann::json& summary = r.array("summary");
  for (std::size_t i = 0; i < summary.size(); ++i) {
    const std::string path = json_element_path(r.path_of("summary"), i);
    const std::vector<std::string> pair = r.source().texts(summary[i], path);
    if (pair.size() != 2) r.source().fail(path, "must be a [key, value] pair of strings");
    report.summary.emplace_back(pair[0], pair[1]);
  }
  report.x_label = r.text("x_label");
  if (json.contains("y_label")) report.y_label = r.text("y_label");
  for (const JsonObject& s : r.objects("series")) report.series.push_back(read_series(s));
  for (const JsonObject& b : r.objects("bands")) {
    report.bands.push_back(
        {b.text("label"), b.number_or_nan("begin"), b.number_or_nan("end"), b.text("detail")});
  }
  // Both are present, null when the report has none.
  if (!r.at("peak").is_null()) {
    const JsonObject peak = r.object("peak");
    report.peak = Marker{peak.text("series"), peak.number_or_nan("t"), peak.number_or_nan("bytes"),
                         peak.text("label")};
  }
  if (!r.at("segment_map").is_null())
    report.segment_map = read_segment_map(r.object("segment_map"));
  for (const JsonObject& t : r.objects("tables")) report.tables.push_back(read_table(t));
  report.notes = r.texts("notes");
  return report;
}

}  // namespace memscope::report
