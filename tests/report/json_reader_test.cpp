// The typed JSON reader (include/memscope/json_reader.hpp): values of the right type come back;
// a missing field or one of the wrong type throws ReportFormatError naming the file, the field by
// its full path, what it must be and the kind of file expected.
#include <cmath>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "memscope/errors.hpp"
#include "memscope/json_reader.hpp"

namespace memscope::report {
namespace {

const JsonSource kFile("run.json", "a test file");

nlohmann::json sample() {
  return nlohmann::json::parse(R"({
    "name": "x", "ok": true, "n": -3, "u": 7, "real": 1.5, "gone": null,
    "list": [1, 2.5], "ints": [1, -2], "names": ["a", "b"], "metrics": {"a": 1},
    "items": [{"pid": 1}, {"pid": "two"}]
  })");
}

std::string error_of(void (*read)(const JsonObject&)) {
  const nlohmann::json j = sample();
  try {
    read(JsonObject(kFile, j, ""));
  } catch (const ReportFormatError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(JsonReader, ReadsEachTypedValue) {
  const nlohmann::json j = sample();
  const JsonObject o(kFile, j, "");
  EXPECT_EQ(o.text("name"), "x");
  EXPECT_TRUE(o.boolean("ok"));
  EXPECT_EQ(o.integer("n"), -3);
  EXPECT_EQ(o.small_int("n"), -3);
  EXPECT_EQ(o.unsigned_integer("u"), 7U);
  EXPECT_EQ(o.number("real"), 1.5);
  EXPECT_TRUE(std::isnan(o.number_or_nan("gone")));
  EXPECT_FALSE(o.optional_small_int("gone"));
  EXPECT_FALSE(o.optional_small_int("absent"));
  EXPECT_FALSE(o.has("gone"));
  EXPECT_EQ(o.numbers("list"), (std::vector<double>{1.0, 2.5}));
  EXPECT_EQ(o.integers("ints"), (std::vector<std::int64_t>{1, -2}));
  EXPECT_EQ(o.texts("names"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(o.integer_map("metrics").at("a"), 1);
  EXPECT_TRUE(o.integer_map("absent").empty());
  EXPECT_EQ(o.objects("items").at(0).integer("pid"), 1);
}

TEST(JsonReader, ErrorsNameTheFileTheFullPathAndTheKind) {
  EXPECT_EQ(error_of([](const JsonObject& o) { (void)o.objects("items").at(1).integer("pid"); }),
            "run.json: field 'items[1].pid' must be an integer (a test file)");
  EXPECT_EQ(error_of([](const JsonObject& o) { (void)o.text("duration"); }),
            "run.json: field 'duration' is missing (a test file)");
  EXPECT_EQ(error_of([](const JsonObject& o) { (void)o.integers("list"); }),
            "run.json: field 'list[1]' must be an integer (a test file)");
  EXPECT_EQ(error_of([](const JsonObject& o) { (void)o.unsigned_integer("n"); }),
            "run.json: field 'n' must be a whole number, 0 or more (a test file)");
  EXPECT_EQ(error_of([](const JsonObject& o) { (void)o.object("name"); }),
            "run.json: field 'name' must be an object (a test file)");
  EXPECT_EQ(error_of([](const JsonObject& o) { (void)o.number("gone"); }),
            "run.json: field 'gone' must be a number (a test file)");
  EXPECT_EQ(error_of([](const JsonObject& o) { (void)o.texts("ints"); }),
            "run.json: field 'ints[0]' must be a string (a test file)");
}

TEST(JsonReader, ADocumentThatIsNotAnObjectIsRefused) {
  const nlohmann::json list = nlohmann::json::array();
  EXPECT_THROW(JsonObject(kFile, list, ""), ReportFormatError);
}

TEST(JsonReader, SmallIntegersMustFitAnInt) {
  const nlohmann::json j = {{"pid", 1LL << 40}};
  const JsonObject o(kFile, j, "");
  EXPECT_THROW((void)o.small_int("pid"), ReportFormatError);
}

}  // namespace
}  // namespace memscope::report
