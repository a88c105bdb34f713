// report_to_json / report_from_json (include/memscope/report_json.hpp): a Report survives
// the trip exactly, and bad input is refused naming the field.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "memscope/errors.hpp"
#include "memscope/report.hpp"
#include "memscope/report_json.hpp"

namespace memscope::report {
namespace {

Report full() {
  Report r;
  r.title = "title \"q\" </script>";
  r.subtitle = "sub";
  r.summary = {{"a", "1"}, {"b", "2 GiB"}};
  r.x_label = "time since the first event (s)";
  r.series.push_back(
      Series{"reserved", {0.0, 0.1, 0.30000000000000004}, {1.0, 2.5, 1e15}, true, true, "bytes"});
  r.series.push_back(Series{"live", {}, {}, false, false, "bytes"});
  r.bands.push_back(Band{"train", 0.5, 1.25, "pid 3"});
  r.peak = Marker{"reserved", 0.1, 2.5, "peak"};
  SegmentMap map;
  map.title = "Segments";
  map.segments.push_back({0xffffffffffffULL,
                          4096,
                          "stream 0",
                          {{0, 1024, "active_allocated", "x"}, {1024, 3072, "inactive", ""}}});
  r.segment_map = map;
  r.tables.push_back(Table{"t", {"a", "b"}, {false, true}, {{"x", "1"}, {"y", "2"}}, "note"});
  r.notes = {"n1", "n2"};
  return r;
}

void expect_equal(const Report& a, const Report& b) {
  // Equal JSON of both is equality of every field (report_to_json writes every field).
  EXPECT_EQ(report_to_json(a).dump(), report_to_json(b).dump());
  EXPECT_EQ(a.title, b.title);
  ASSERT_EQ(a.series.size(), b.series.size());
  EXPECT_EQ(a.series[0].t, b.series[0].t);  // doubles exactly
  EXPECT_EQ(a.series[0].bytes, b.series[0].bytes);
  EXPECT_EQ(a.series[0].sampled, b.series[0].sampled);
  EXPECT_EQ(a.series[0].step, b.series[0].step);
  ASSERT_EQ(a.peak.has_value(), b.peak.has_value());
  ASSERT_EQ(a.segment_map.has_value(), b.segment_map.has_value());
  if (a.segment_map) {
    EXPECT_EQ(a.segment_map->segments[0].address, b.segment_map->segments[0].address);
    EXPECT_EQ(a.segment_map->segments[0].blocks[1].state,
              b.segment_map->segments[0].blocks[1].state);
  }
  ASSERT_EQ(a.tables.size(), b.tables.size());
  EXPECT_EQ(a.tables[0].numeric, b.tables[0].numeric);
  EXPECT_EQ(a.tables[0].rows, b.tables[0].rows);
  EXPECT_EQ(a.notes, b.notes);
  EXPECT_EQ(a.summary, b.summary);
}

TEST(ReportJson, RoundTripIsExact) {
  const Report r = full();
  const nlohmann::json j = report_to_json(r);
  expect_equal(r, report_from_json(j, "mem.json"));
  // Through text as well, as `replay --json` and `report` do.
  expect_equal(r, report_from_json(nlohmann::json::parse(j.dump()), "mem.json"));
}

TEST(ReportJson, EmptyReportRoundTrips) {
  const Report r;
  const Report back = report_from_json(report_to_json(r), "x.json");
  EXPECT_FALSE(back.peak);
  EXPECT_FALSE(back.segment_map);
  EXPECT_TRUE(back.series.empty());
  EXPECT_EQ(back.x_label, r.x_label);
}

void expect_refused(const nlohmann::json& j, const std::string& field) {
  try {
    (void)report_from_json(j, "bad.json");
    ADD_FAILURE() << "accepted: " << j.dump();
  } catch (const ReportFormatError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("bad.json"), std::string::npos) << what;
    EXPECT_NE(what.find(field), std::string::npos) << what;
  }
}

TEST(ReportJson, BadInputNamesTheField) {
  expect_refused(nlohmann::json::array(), "object");
  nlohmann::json j = report_to_json(full());
  j["title"] = 3;
  expect_refused(j, "title");
  j = report_to_json(full());
  j["series"][0]["t"] = "no";
  expect_refused(j, "series[0].t");
  j = report_to_json(full());
  j["series"][0]["bytes"].push_back(1.0);  // lengths differ
  expect_refused(j, "series[0].bytes");
  j = report_to_json(full());
  j["segment_map"]["segments"][0]["blocks"][0].erase("size");
  expect_refused(j, "segment_map.segments[0].blocks[0].size");
  j = report_to_json(full());
  j["tables"][0]["rows"][0] = {1, 2};
  expect_refused(j, "tables[0].rows[0]");
  j = report_to_json(full());
  j["peak"] = "high";
  expect_refused(j, "peak");
}

}  // namespace
}  // namespace memscope::report
