// read_torch_snapshot_pickle (the snapshot read in place, without a PickleValue) must agree with
// read_torch_snapshot(read_pickle(...)) on every input: the same snapshot, or the same error.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "memscope/errors.hpp"
#include "memscope/trace.hpp"

namespace memscope {
namespace {

std::string real_trace_bytes() {
  std::ifstream in(MEMSCOPE_REAL_TRACE, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The snapshot as JSON (every field the data model keeps), or "error: " and the message.
std::string via_value(const std::string& data, const PickleLimits& limits = {}) {
  try {
    return torch_snapshot_json(read_torch_snapshot(read_pickle(data, "in", limits), "in"));
  } catch (const TraceFormatError& e) {
    return std::string("error: ") + e.what();
  }
}

std::string direct(const std::string& data, const PickleLimits& limits = {}) {
  try {
    return torch_snapshot_json(read_torch_snapshot_pickle(data, "in", limits));
  } catch (const TraceFormatError& e) {
    return std::string("error: ") + e.what();
  }
}

TEST(SnapshotDirect, RealTraceReadsTheSameAsThroughAPickleValue) {
  const std::string data = real_trace_bytes();
  ASSERT_FALSE(data.empty());
  const std::string expected = via_value(data);
  ASSERT_EQ(expected.rfind("error", 0), std::string::npos) << expected;
  EXPECT_EQ(direct(data), expected);
  const TorchSnapshot s = read_torch_snapshot_pickle(data);
  EXPECT_EQ(s.segments.size(), 216U);
  EXPECT_EQ(read_torch_snapshot_file(MEMSCOPE_REAL_TRACE).segments.size(), 216U);
}

TEST(SnapshotDirect, LimitsGiveTheSameErrors) {
  const std::string data = real_trace_bytes();
  PickleLimits few;
  few.max_tree_items = 1000;
  const std::string expected = via_value(data, few);
  EXPECT_NE(expected.find("max_tree_items"), std::string::npos) << expected;
  EXPECT_EQ(direct(data, few), expected);
  PickleLimits shallow;
  shallow.max_depth = 3;
  const std::string too_deep = via_value(data, shallow);
  EXPECT_NE(too_deep.find("max_depth"), std::string::npos) << too_deep;
  EXPECT_EQ(direct(data, shallow), too_deep);
}

TEST(SnapshotDirect, RecursiveAndCodePicklesGiveTheSameErrors) {
  // A list that appends itself: ] BINPUT 0, BINGET 0, APPEND, STOP (protocol 2).
  const std::string recursive(
      "\x80\x02]q\x00h\x00"
      "a.",
      9);
  EXPECT_NE(via_value(recursive).find("recursive"), std::string::npos);
  EXPECT_EQ(direct(recursive), via_value(recursive));
  const std::string code(
      "\x80\x02"
      "cos\nsystem\n.",
      14);
  EXPECT_NE(via_value(code).find("refused"), std::string::npos);
  EXPECT_EQ(direct(code), via_value(code));
  EXPECT_EQ(direct(""), via_value(""));
}

// Random damage to the real snapshot (fixed seed): flipped bytes and truncations must give the
// same snapshot or the same error both ways.
TEST(SnapshotDirect, DamagedSnapshotsAgree) {
  const std::string data = real_trace_bytes();
  std::mt19937_64 rng(11);
  int errors = 0;
  for (int round = 0; round < 120; ++round) {
    std::string damaged = data;
    if (round % 4 == 0) {
      damaged.resize(std::uniform_int_distribution<std::size_t>(0, data.size() - 1)(rng));
    } else {
      const int flips = 1 + round % 3;
      for (int i = 0; i < flips; ++i) {
        const std::size_t at = std::uniform_int_distribution<std::size_t>(0, data.size() - 1)(rng);
        damaged[at] = static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
      }
    }
    const std::string expected = via_value(damaged);
    errors += expected.rfind("error", 0) == 0 ? 1 : 0;
    ASSERT_EQ(direct(damaged), expected) << "round " << round;
  }
  EXPECT_GT(errors, 30);  // the damage reached the error paths, not only harmless bytes
}

}  // namespace
}  // namespace memscope
