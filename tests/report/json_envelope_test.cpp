// The envelope of every JSON kind memscope writes (include/memscope/json_envelope.hpp): what a
// writer starts from, how input files are told apart, and the refusal of a newer version.
#include <optional>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "memscope/errors.hpp"
#include "memscope/json_envelope.hpp"
#include "memscope/json_reader.hpp"

namespace memscope::report {
namespace {

std::string error_of(const nlohmann::json& json, const std::string& kind, int max_version) {
  const JsonSource file("saved.json", "a memscope " + kind);
  try {
    (void)read_envelope(JsonObject(file, json, ""), kind, max_version);
  } catch (const ReportFormatError& e) {
    return e.what();
  }
  return "";
}

class EveryKind : public ::testing::TestWithParam<const char*> {};

TEST_P(EveryKind, WritesItsFormatAndRefusesANewerVersionSayingToUpgrade) {
  const std::string kind = GetParam();
  nlohmann::json json = envelope(kind, 2);
  EXPECT_EQ(json["format"], "memscope-" + kind);
  EXPECT_EQ(json["version"], 2);
  EXPECT_EQ(envelope_kind(json), kind);
  EXPECT_EQ(error_of(json, kind, 2), "");
  EXPECT_EQ(error_of(envelope(kind, 1), kind, 2), "");

  EXPECT_EQ(error_of(json, kind, 1),
            "saved.json: memscope-" + kind +
                " version 2 was written by a newer memscope (this one reads versions 1 to 1): "
                "upgrade memscope to read it");
  json["version"] = 0;
  EXPECT_NE(error_of(json, kind, 1).find("field 'version' must be an integer from 1 to 1"),
            std::string::npos);
  json["version"] = "1";
  EXPECT_NE(error_of(json, kind, 1).find("field 'version' must be"), std::string::npos);
}

TEST_P(EveryKind, AnotherFormatIsRefusedNamingWhatWasFound) {
  const std::string kind = GetParam();
  const std::string other = kind == "run" ? "replay" : "run";
  EXPECT_EQ(error_of(envelope(other, 1), kind, 1), "saved.json: not a memscope " + kind +
                                                       ": it has \"format\" \"memscope-" + other +
                                                       "\", not \"memscope-" + kind + "\"");
  EXPECT_NE(error_of(nlohmann::json::object(), kind, 1).find("it has no \"format\""),
            std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Envelope, EveryKind,
                         ::testing::Values("run", "replay", "diff", "info", "report"));

TEST(Envelope, KindOfWhatIsNotAMemscopeObjectIsNone) {
  EXPECT_EQ(envelope_kind(nlohmann::json::array()), std::nullopt);
  EXPECT_EQ(envelope_kind(nlohmann::json{{"format", 5}}), std::nullopt);
  EXPECT_EQ(envelope_kind(nlohmann::json{{"format", "pytorch"}}), std::nullopt);
  EXPECT_EQ(envelope_kind(nlohmann::json{{"x", 1}}), std::nullopt);
}

TEST(Envelope, AnObjectInsideAFileIsNamedByItsPath) {
  const nlohmann::json doc = {{"report", envelope("report", 9)}};
  const JsonSource file("out.json", "a memscope replay result");
  const JsonObject report = JsonObject(file, doc, "").object("report");
  try {
    (void)read_envelope(report, "report", 1);
    FAIL() << "a newer report was read";
  } catch (const ReportFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("memscope-report version 9 (at 'report') was written"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace memscope::report
