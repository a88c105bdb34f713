// read_torch_snapshot_pickle (the snapshot read in place, without a PickleValue) must agree with
// read_torch_snapshot(read_pickle(...)) on every input: the same snapshot, or the same error.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "memscope/errors.hpp"
#include "memscope/replay.hpp"
#include "memscope/trace.hpp"
#include "trace/pickle_writer.hpp"
#include "trace_corpus.hpp"

namespace memscope {
namespace {

std::string file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
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
  MEMSCOPE_TRACE_OR_SKIP(real, corpus::kSmallTrainStep);
  const std::string data = file_bytes(real);
  ASSERT_FALSE(data.empty());
  const std::string expected = via_value(data);
  ASSERT_EQ(expected.rfind("error", 0), std::string::npos) << expected;
  EXPECT_EQ(direct(data), expected);
  const TorchSnapshot s = read_torch_snapshot_pickle(data);
  EXPECT_EQ(s.segments.size(), 216U);
  EXPECT_EQ(read_torch_snapshot_file(real).segments.size(), 216U);
}

// A snapshot as PyTorch writes it under Python 3.13 when it does not know a frame's line: the
// line is 2^64 - 1, which Python pickles as LONG1 of nine bytes (memscope's writer writes the
// bytes Python writes for the same value). `addr` is given by the caller.
std::string snapshot_with_line(std::uint64_t line, std::uint64_t addr = 4096) {
  detail::PickleWriter w(4);
  w.begin_dict(2);
  w.literal("segments");
  w.begin_list(0);
  w.literal("device_traces");
  w.begin_list(1);
  w.begin_list(2);
  for (const char* action : {"alloc", "free_completed"}) {
    w.begin_dict(5);
    w.literal("action");
    w.literal(action);
    w.literal("addr");
    w.natural(addr);
    w.literal("size");
    w.natural(512);
    w.literal("stream");
    w.natural(0);
    w.literal("frames");
    w.begin_list(2);
    for (const std::uint64_t l : {line, std::uint64_t{12}}) {
      w.begin_dict(3);
      w.literal("filename");
      w.text(l == 12 ? "train.py" : "??");
      w.literal("line");
      w.natural(l);
      w.literal("name");
      w.text(l == 12 ? "step" : "<unknown>");
    }
  }
  return w.finish();
}

TEST(SnapshotDirect, AFrameLineBeyondInt64ReadsAsUnknown) {
  const std::string data = snapshot_with_line(~std::uint64_t{0});
  ASSERT_NE(data.find(std::string("\x8a\x09") + std::string(8, '\xff') + '\0'), std::string::npos)
      << "the synthetic file must hold the nine-byte LONG1 Python writes";
  const std::string expected = via_value(data);
  ASSERT_EQ(expected.rfind("error", 0), std::string::npos) << expected;
  EXPECT_EQ(direct(data), expected);
  const TorchSnapshot s = read_torch_snapshot_pickle(data, "py313.pickle");
  const std::vector<TraceFrame> frames = s.strings.stack_frames(s.device_traces.at(0).at(0).stack);
  ASSERT_EQ(frames.size(), 2U);
  EXPECT_EQ(frames[0].line, 0);  // TraceFrame: 0 when unknown
  EXPECT_EQ(frames[0].name, "<unknown>");
  EXPECT_EQ(frames[1].line, 12);
  EXPECT_EQ(build_replay_plan(s).peak_live, 512U);
}

TEST(SnapshotDirect, AnAddressBeyondInt64IsRefusedNamingIt) {
  const std::string data = snapshot_with_line(12, std::uint64_t{1} << 63);
  const std::string message =
      "py313.pickle: device_traces[0][0].addr: integer 9223372036854775808 does not fit in 64 bits";
  for (const auto& read : {via_value, direct}) {
    const std::string got = read(data, {});
    EXPECT_NE(got.find(message.substr(message.find(':') + 2)), std::string::npos) << got;
  }
}

// Every trace of the corpus (two of them written under Python 3.13, with frame lines of
// 2^64 - 1) is read, the same both ways, and its replay plan ends as the snapshot does.
TEST(SnapshotDirect, EveryCorpusTraceReadsTheSameBothWays) {
  const auto traces = corpus::all_traces();
  if (traces.empty())
    GTEST_SKIP() << "no traces in " << corpus::traces_dir() << " (MEMSCOPE_TRACES)";
  for (const auto& path : traces) {
    SCOPED_TRACE(path.string());
    const std::string data = file_bytes(path);
    const std::string expected = via_value(data);
    EXPECT_EQ(expected.rfind("error", 0), std::string::npos) << expected;
    EXPECT_EQ(direct(data), expected);
  }
}

TEST(SnapshotDirect, LimitsGiveTheSameErrors) {
  MEMSCOPE_TRACE_OR_SKIP(real, corpus::kSmallTrainStep);
  const std::string data = file_bytes(real);
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
  MEMSCOPE_TRACE_OR_SKIP(real, corpus::kSmallTrainStep);
  const std::string data = file_bytes(real);
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
