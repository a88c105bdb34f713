// A Report as JSON and back (report_json.hpp): {"format": "memscope-report", "version": 1}
// and every field of report.hpp under its own name. Doubles are written with enough
// digits to read back the same number; a non-finite one is written as null and read as NaN.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "memscope/errors.hpp"
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

// Reading: every accessor names the field by its path ("series[2].t") in the error.
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& expected) const {
    throw ReportFormatError(
        fmt::format("{}: the report's field '{}' must be {}", source_, path, expected));
  }
  const nlohmann::json& field(const nlohmann::json& object, const std::string& path,
                              const char* key) const {
    const auto it = object.find(key);
    if (it == object.end()) fail(path, "present");
    return *it;
  }
  std::string string(const nlohmann::json& object, const std::string& path, const char* key) const {
    const nlohmann::json& v = field(object, path, key);
    if (!v.is_string()) fail(path, "a string");
    return v.get<std::string>();
  }
  bool boolean(const nlohmann::json& object, const std::string& path, const char* key) const {
    const nlohmann::json& v = field(object, path, key);
    if (!v.is_boolean()) fail(path, "true or false");
    return v.get<bool>();
  }
  double real(const nlohmann::json& v, const std::string& path) const {
    if (v.is_null()) return std::numeric_limits<double>::quiet_NaN();
    if (!v.is_number()) fail(path, "a number");
    return v.get<double>();
  }
  double real(const nlohmann::json& object, const std::string& path, const char* key) const {
    return real(field(object, path, key), path);
  }
  std::uint64_t unsigned_integer(const nlohmann::json& object, const std::string& path,
                                 const char* key) const {
    const nlohmann::json& v = field(object, path, key);
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0)) {
      fail(path, "a whole number of bytes, 0 or more");
    }
    return v.get<std::uint64_t>();
  }
  const nlohmann::json& array(const nlohmann::json& object, const std::string& path,
                              const char* key) const {
    const nlohmann::json& v = field(object, path, key);
    if (!v.is_array()) fail(path, "a list");
    return v;
  }
  const nlohmann::json& object(const nlohmann::json& v, const std::string& path) const {
    if (!v.is_object()) fail(path, "an object");
    return v;
  }
  std::vector<double> reals(const nlohmann::json& object, const std::string& path,
                            const char* key) const {
    std::vector<double> out;
    const nlohmann::json& list = array(object, path, key);
    out.reserve(list.size());
    for (const auto& v : list) out.push_back(real(v, path));
    return out;
  }
  std::vector<std::string> strings(const nlohmann::json& list, const std::string& path) const {
    if (!list.is_array()) fail(path, "a list of strings");
    std::vector<std::string> out;
    for (const auto& v : list) {
      if (!v.is_string()) fail(path, "a list of strings");
      out.push_back(v.get<std::string>());
    }
    return out;
  }

 private:
  std::string source_;
};

std::string at(const std::string& path, std::size_t i) {
  return fmt::format("{}[{}]", path, i);
}

Series read_series(const Reader& r, const nlohmann::json& j, const std::string& p) {
  r.object(j, p);
  Series s;
  s.name = r.string(j, p + ".name", "name");
  s.t = r.reals(j, p + ".t", "t");
  s.bytes = r.reals(j, p + ".bytes", "bytes");
  if (s.bytes.size() != s.t.size()) r.fail(p + ".bytes", "as long as " + p + ".t");
  s.sampled = r.boolean(j, p + ".sampled", "sampled");
  s.step = r.boolean(j, p + ".step", "step");
  // Newer than the format's first version: absent means a solid line.
  s.dashed = j.contains("dashed") && r.boolean(j, p + ".dashed", "dashed");
  s.unit = r.string(j, p + ".unit", "unit");
  return s;
}

SegmentMap read_segment_map(const Reader& r, const nlohmann::json& j, const std::string& p) {
  r.object(j, p);
  SegmentMap map;
  map.title = r.string(j, p + ".title", "title");
  const nlohmann::json& segments = r.array(j, p + ".segments", "segments");
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const std::string sp = at(p + ".segments", i);
    const nlohmann::json& sj = r.object(segments[i], sp);
    SegmentMap::Segment seg;
    seg.address = r.unsigned_integer(sj, sp + ".address", "address");
    seg.size = r.unsigned_integer(sj, sp + ".size", "size");
    seg.label = r.string(sj, sp + ".label", "label");
    const nlohmann::json& blocks = r.array(sj, sp + ".blocks", "blocks");
    for (std::size_t k = 0; k < blocks.size(); ++k) {
      const std::string bp = at(sp + ".blocks", k);
      const nlohmann::json& bj = r.object(blocks[k], bp);
      seg.blocks.push_back({r.unsigned_integer(bj, bp + ".offset", "offset"),
                            r.unsigned_integer(bj, bp + ".size", "size"),
                            r.string(bj, bp + ".state", "state"),
                            r.string(bj, bp + ".label", "label")});
    }
    map.segments.push_back(std::move(seg));
  }
  return map;
}

Table read_table(const Reader& r, const nlohmann::json& j, const std::string& p) {
  r.object(j, p);
  Table t;
  t.title = r.string(j, p + ".title", "title");
  t.columns = r.strings(r.field(j, p + ".columns", "columns"), p + ".columns");
  const nlohmann::json& numeric = r.array(j, p + ".numeric", "numeric");
  for (const auto& v : numeric) {
    if (!v.is_boolean()) r.fail(p + ".numeric", "a list of true or false");
    t.numeric.push_back(v.get<bool>());
  }
  const nlohmann::json& rows = r.array(j, p + ".rows", "rows");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    t.rows.push_back(r.strings(rows[i], at(p + ".rows", i)));
  }
  t.note = r.string(j, p + ".note", "note");
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
  nlohmann::json j = {{"format", "memscope-report"}, {"version", kVersion}};
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
  const Reader r(source);
  if (!json.is_object()) {
    throw ReportFormatError(source + ": a memscope report must be a JSON object");
  }
  if (json.value("format", nlohmann::json()) != "memscope-report") {  // any type: no throw
    r.fail("format", "\"memscope-report\"");
  }
  const nlohmann::json& version = r.field(json, "version", "version");
  if (!version.is_number_integer() || version.get<std::int64_t>() != kVersion) {
    r.fail("version",
           fmt::format("{} (this memscope reads version {} reports)", kVersion, kVersion));
  }
  Report report;
  report.title = r.string(json, "title", "title");
  report.subtitle = r.string(json, "subtitle", "subtitle");
  const nlohmann::json& summary = r.array(json, "summary", "summary");
  for (std::size_t i = 0; i < summary.size(); ++i) {
    const std::vector<std::string> pair = r.strings(summary[i], at("summary", i));
    if (pair.size() != 2) r.fail(at("summary", i), "a [key, value] pair of strings");
    report.summary.emplace_back(pair[0], pair[1]);
  }
  report.x_label = r.string(json, "x_label", "x_label");
  if (json.contains("y_label")) report.y_label = r.string(json, "y_label", "y_label");
  const nlohmann::json& series = r.array(json, "series", "series");
  for (std::size_t i = 0; i < series.size(); ++i) {
    report.series.push_back(read_series(r, series[i], at("series", i)));
  }
  const nlohmann::json& bands = r.array(json, "bands", "bands");
  for (std::size_t i = 0; i < bands.size(); ++i) {
    const std::string p = at("bands", i);
    const nlohmann::json& b = r.object(bands[i], p);
    report.bands.push_back({r.string(b, p + ".label", "label"), r.real(b, p + ".begin", "begin"),
                            r.real(b, p + ".end", "end"), r.string(b, p + ".detail", "detail")});
  }
  const nlohmann::json& peak = r.field(json, "peak", "peak");
  if (!peak.is_null()) {
    r.object(peak, "peak");
    report.peak =
        Marker{r.string(peak, "peak.series", "series"), r.real(peak, "peak.t", "t"),
               r.real(peak, "peak.bytes", "bytes"), r.string(peak, "peak.label", "label")};
  }
  const nlohmann::json& map = r.field(json, "segment_map", "segment_map");
  if (!map.is_null()) report.segment_map = read_segment_map(r, map, "segment_map");
  const nlohmann::json& tables = r.array(json, "tables", "tables");
  for (std::size_t i = 0; i < tables.size(); ++i) {
    report.tables.push_back(read_table(r, tables[i], at("tables", i)));
  }
  report.notes = r.strings(r.field(json, "notes", "notes"), "notes");
  return report;
}

}  // namespace memscope::report
