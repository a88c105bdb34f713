// JSON snapshots: read into the same model as the pickle (a randomized fixed-seed comparison of
// the two readers on equal documents), and every kind of bad input refused with a message that
// names the file and the byte offset or the key path.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <random>
#include <string>
#include <vector>

#include "memscope/trace.hpp"
#include "pickle_test_util.hpp"

namespace memscope {
namespace {

using nlohmann::json;

// The same document as a PickleValue, by walking the tree (the reader under test uses SAX).
PickleValue to_pickle(const json& j) {
  switch (j.type()) {
    case json::value_t::object: {
      std::vector<PickleDict::Item> items;
      for (const auto& [k, v] : j.items()) items.emplace_back(testing::str(k), to_pickle(v));
      return PickleValue{PickleDict(std::move(items))};
    }
    case json::value_t::array: {
      std::vector<PickleValue> items;
      for (const json& v : j) items.push_back(to_pickle(v));
      return PickleValue{PickleList(std::move(items))};
    }
    case json::value_t::string:
      return PickleValue{j.get<std::string>()};
    case json::value_t::boolean:
      return PickleValue{j.get<bool>()};
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return PickleValue{j.get<std::int64_t>()};
    case json::value_t::number_float:
      return PickleValue{j.get<double>()};
    default:
      return PickleValue{};
  }
}

// A random snapshot: devices, streams, frames (some stacks repeated), tags, every action.
json random_snapshot(std::mt19937_64& rng) {
  const auto pick = [&](std::uint64_t n) { return static_cast<std::int64_t>(rng() % n); };
  const std::vector<std::string> actions{"alloc",         "free_requested", "free_completed",
                                         "segment_alloc", "segment_free",   "segment_map",
                                         "segment_unmap", "snapshot",       "annotate"};
  std::vector<json> stacks{json::array()};
  for (int i = 0; i < 6; ++i) {
    json stack = json::array();
    for (std::int64_t f = 0; f <= pick(4); ++f) {
      stack.push_back({{"filename", testing::cat("f", std::to_string(pick(5)), ".py")},
                       {"line", pick(100)},
                       {"name", testing::cat("fn", std::to_string(pick(3)))}});
    }
    stacks.push_back(stack);
  }
  json doc = {{"segments", json::array()}, {"device_traces", json::array()}};
  const std::int64_t devices = 1 + pick(3);
  for (std::int64_t d = 0; d < devices; ++d) {
    json trace = json::array();
    for (std::int64_t i = pick(40); i > 0; --i) {
      json e = {
          {"action", actions[static_cast<std::size_t>(pick(actions.size()))]},
          {"addr", pick(std::uint64_t{1} << 40)},
          {"size", pick(std::uint64_t{1} << 32)},
          {"stream", pick(4)},
          {"time_us", pick(std::uint64_t{1} << 50)},
          {"frames", stacks[static_cast<std::size_t>(pick(stacks.size()))]},
          {"user_metadata", pick(3) == 0 ? "" : testing::cat("stage", std::to_string(pick(3)))}};
      if (pick(10) == 0) {
        e = {{"action", "oom"}, {"device_free", pick(1000)}, {"size", pick(1000)}, {"stream", 0}};
      }
      trace.push_back(e);
    }
    doc["device_traces"].push_back(trace);
    json blocks = json::array();
    for (std::int64_t b = pick(4); b >= 0; --b) {
      blocks.push_back({{"size", 512 * (1 + pick(8))},
                        {"requested_size", pick(512)},
                        {"state", pick(2) == 0 ? "inactive" : "active_allocated"},
                        {"frames", stacks[static_cast<std::size_t>(pick(stacks.size()))]}});
    }
    doc["segments"].push_back({{"device", d},
                               {"address", pick(std::uint64_t{1} << 40)},
                               {"total_size", std::int64_t{1} << 21},
                               {"stream", pick(4)},
                               {"segment_type", pick(2) == 0 ? "small" : "large"},
                               {"is_expandable", pick(2) == 0},
                               {"blocks", blocks}});
  }
  doc["allocator_settings"] = {
      {"PYTORCH_CUDA_ALLOC_CONF", testing::cat("max_split_size_mb:", std::to_string(pick(100)))}};
  return doc;
}

void expect_same(const TorchSnapshot& a, const TorchSnapshot& b) {
  ASSERT_EQ(a.device_traces.size(), b.device_traces.size());
  for (std::size_t d = 0; d < a.device_traces.size(); ++d) {
    ASSERT_EQ(a.device_traces[d].size(), b.device_traces[d].size());
    for (std::size_t i = 0; i < a.device_traces[d].size(); ++i) {
      const TraceEvent& x = a.device_traces[d][i];
      const TraceEvent& y = b.device_traces[d][i];
      EXPECT_EQ(x.action, y.action);
      EXPECT_EQ(x.addr, y.addr);
      EXPECT_EQ(x.size, y.size);
      EXPECT_EQ(x.stream, y.stream);
      EXPECT_EQ(x.time_us, y.time_us);
      EXPECT_EQ(a.strings.stack_frames(x.stack), b.strings.stack_frames(y.stack));
      EXPECT_EQ(a.strings.tags.at(x.tag), b.strings.tags.at(y.tag));
    }
  }
  ASSERT_EQ(a.segments.size(), b.segments.size());
  for (std::size_t s = 0; s < a.segments.size(); ++s) {
    EXPECT_EQ(a.segments[s].device, b.segments[s].device);
    EXPECT_EQ(a.segments[s].is_expandable, b.segments[s].is_expandable);
    EXPECT_EQ(a.segments[s].info.address, b.segments[s].info.address);
    EXPECT_EQ(a.segments[s].info.blocks.size(), b.segments[s].info.blocks.size());
    EXPECT_EQ(a.segments[s].block_stacks.size(), b.segments[s].block_stacks.size());
  }
  EXPECT_EQ(a.settings, b.settings);
}

TEST(JsonSnapshot, ReadsAsThePickleReaderReadsTheSameDocument) {
  std::mt19937_64 rng(20261203);
  std::size_t events = 0;
  for (int round = 0; round < 200; ++round) {
    const json doc = random_snapshot(rng);
    const TorchSnapshot from_json = read_torch_snapshot_json(doc.dump(round % 2 ? 1 : -1), "r");
    const TorchSnapshot from_value = read_torch_snapshot(to_pickle(doc), "r");
    expect_same(from_json, from_value);
    for (const auto& t : from_json.device_traces) events += t.size();
    if (::testing::Test::HasFailure()) FAIL() << "round " << round << ": " << doc.dump();
  }
  EXPECT_GT(events, 2000U);  // the rounds did exercise the reader
}

TEST(JsonSnapshot, HandWrittenDocument) {
  const TorchSnapshot s = read_torch_snapshot_json(R"({
    "segments": [{"device": 1, "address": 4096, "total_size": 2097152, "stream": 7,
                  "segment_type": "large", "is_expandable": true,
                  "blocks": [{"size": 2097152, "requested_size": 100, "state": "active_allocated",
                              "frames": [{"filename": "a.py", "line": 3, "name": "f"}]}]}],
    "device_traces": [[], [
      {"action": "alloc", "addr": 4096, "size": 100, "stream": 7, "time_us": 5,
       "frames": [{"filename": "a.py", "line": 3, "name": "f"}], "user_metadata": "fwd"},
      {"action": "oom", "device_free": 77, "size": 1099511627776, "stream": 7, "time_us": 6}]],
    "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
  })",
                                                   "hand.json");
  ASSERT_EQ(s.device_traces.size(), 2U);
  const auto& t = s.device_traces[1];
  ASSERT_EQ(t.size(), 2U);
  EXPECT_EQ(t[0].stream, 7U);
  EXPECT_EQ(s.strings.tags.at(t[0].tag), "fwd");
  EXPECT_EQ(t[0].stack, s.segments.at(0).block_stacks.at(0));
  EXPECT_EQ(t[1].action, TraceAction::oom);
  EXPECT_EQ(t[1].addr, 77U);
  EXPECT_TRUE(s.segments[0].is_expandable);
  EXPECT_EQ(s.settings, "expandable_segments:True");
  // A bare list of segments, as PyTorch before 2.1 wrote.
  EXPECT_TRUE(read_torch_snapshot_json("[]").segments.empty());
}

std::string json_error(const std::string& text) {
  return testing::format_error([&] { (void)read_torch_snapshot_json(text, "x.json"); });
}

#define EXPECT_JSON_ERROR(text, part) \
  EXPECT_NE(json_error(text).find(part), std::string::npos) << json_error(text)

TEST(JsonSnapshot, BadInputIsATypedErrorNamingWhere) {
  EXPECT_JSON_ERROR("", "x.json: not valid JSON at byte 1");
  EXPECT_JSON_ERROR("{\"segments\": [}", "x.json: not valid JSON at byte 15");
  EXPECT_JSON_ERROR("{\"segments\": []} x", "x.json: not valid JSON at byte 18");  // trailing
  EXPECT_JSON_ERROR("{\"segments\": NaN}", "not valid JSON at byte 14");
  EXPECT_JSON_ERROR("{\"segments\": [], \"x\": 1e999}", "number overflow");
  EXPECT_JSON_ERROR("{\"segments\": [], \"x\": \"\xff\"}", "not valid JSON");  // not UTF-8
  EXPECT_JSON_ERROR(
      R"({"segments": [], "device_traces": [[{"action": "alloc", "addr": 18446744073709551615, "size": 8}]]})",
      "x.json: device_traces[0][0].addr: integer 18446744073709551615 does not fit in 64 bits");
  EXPECT_JSON_ERROR(R"({"segments": [], "segments": []})",
                    "x.json: segments: the key appears twice in one object");
  EXPECT_JSON_ERROR(std::string(201, '[') + std::string(201, ']'),
                    "containers nest deeper than 200 levels");
  // Well-formed JSON that is not a snapshot: the snapshot reader's messages.
  EXPECT_JSON_ERROR(R"({"segments": [], "device_traces": [[{"action": "alloc", "addr": 1,
                        "size": "8"}]]})",
                    "x.json: device_traces[0][0].size: expected int, found str");
  EXPECT_JSON_ERROR(R"({"segments": [], "device_traces": [[{"action": "alloc", "addr": 1.5,
                        "size": 8}]]})",
                    "x.json: device_traces[0][0].addr: expected int, found float");
  EXPECT_JSON_ERROR(R"({"device_traces": []})",
                    "x.json: the snapshot: missing the field 'segments'");
  EXPECT_JSON_ERROR("42", "x.json: the snapshot: expected dict, found int");
}

// Many keys in one object: duplicates are still found (through the hashed index) and the time
// stays linear.
TEST(JsonSnapshot, LargeObjectsFindDuplicatesToo) {
  std::string doc = "{\"segments\": []";
  for (int i = 0; i < 5000; ++i) doc += ", \"k" + std::to_string(i) + "\": " + std::to_string(i);
  EXPECT_NO_THROW((void)read_torch_snapshot_json(doc + "}"));
  EXPECT_JSON_ERROR(doc + ", \"k4321\": 0}", "x.json: k4321: the key appears twice");
  EXPECT_JSON_ERROR(doc + ", \"segments\": 0}", "x.json: segments: the key appears twice");
}

}  // namespace
}  // namespace memscope
