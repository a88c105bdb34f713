// Reading PyTorch snapshots beyond the replay's needs: stack frames (kept, interned, shared),
// tags, several devices and streams, every action PyTorch writes, expandable segments, the
// settings; format detection and read_trace_file(). JSON and RMM logs have their own files.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "memscope/trace.hpp"
#include "pickle_test_util.hpp"
#include "trace_corpus.hpp"

namespace memscope {
namespace {

using testing::dict;
using testing::format_error;
using testing::list;
using testing::num;
using testing::str;

#define EXPECT_CONTAINS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

// ---- The real snapshot: frames ------------------------------------------------------------

class RealFrames : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (const auto path = corpus::find_trace(corpus::kSmallTrainStep)) {
      snapshot_ = read_torch_snapshot_file(*path);
    }
  }
  void SetUp() override {
    if (!snapshot_) GTEST_SKIP() << corpus::missing_reason(corpus::kSmallTrainStep);
  }
  static inline std::optional<TorchSnapshot> snapshot_;
};

// Figures computed from the file with Python's pickle: 1,421 events carry frames, through 54
// distinct stacks of 55 distinct frames; 2 blocks carry frames.
TEST_F(RealFrames, AreKeptAndInterned) {
  const auto& events = snapshot_->device_traces.at(0);
  const auto with_stack =
      std::count_if(events.begin(), events.end(), [](const TraceEvent& e) { return e.stack != 0; });
  EXPECT_EQ(with_stack, 1421);
  EXPECT_EQ(snapshot_->strings.stacks.size(), 55U);  // 54 and "none"
  EXPECT_EQ(snapshot_->strings.frames.size(), 55U);
  std::size_t blocks_with_stack = 0;
  for (const TorchSegment& seg : snapshot_->segments) {
    EXPECT_TRUE(seg.block_stacks.empty() || seg.block_stacks.size() == seg.info.blocks.size());
    for (const StackId id : seg.block_stacks) blocks_with_stack += id != 0 ? 1 : 0;
  }
  EXPECT_EQ(blocks_with_stack, 2U);
}

TEST_F(RealFrames, InnermostFirstWithFileLineAndName) {
  const std::vector<TraceFrame> stack =
      snapshot_->strings.stack_frames(snapshot_->device_traces.at(0).at(0).stack);
  ASSERT_EQ(stack.size(), 7U);
  EXPECT_EQ(stack.front().name, "forward");
  EXPECT_EQ(stack.front().line, 54);
  EXPECT_TRUE(stack.front().filename.ends_with("cs336_basics\\model.py"));
  EXPECT_EQ(stack.back().name, "<module>");
  EXPECT_EQ(stack.back().line, 65);
}

// Events 3 and 4 share one frame list in the file; equal stacks get equal ids anyway.
TEST_F(RealFrames, SharedListsGiveOneStack) {
  const auto& events = snapshot_->device_traces.at(0);
  EXPECT_NE(events.at(3).stack, 0U);
  EXPECT_EQ(events.at(3).stack, events.at(4).stack);
  EXPECT_TRUE(snapshot_->settings.empty());                 // PYTORCH_CUDA_ALLOC_CONF was ''
  for (const TraceEvent& e : events) EXPECT_EQ(e.tag, 0U);  // user_metadata all ''
}

// ---- Hand-built snapshots: every field -----------------------------------------------------

PickleValue frame(const char* file, std::int64_t line, const char* name) {
  return dict({{"filename", str(file)}, {"line", num(line)}, {"name", str(name)}});
}

PickleValue event(const char* action, std::int64_t addr, std::int64_t size, std::int64_t stream,
                  PickleValue frames = list({}), const char* metadata = "") {
  return dict({{"action", str(action)},
               {"addr", num(addr)},
               {"size", num(size)},
               {"stream", num(stream)},
               {"time_us", num(addr + size)},
               {"frames", std::move(frames)},
               {"user_metadata", str(metadata)}});
}

// Two devices, three streams, every action PyTorch writes (oom with device_free, not addr), a
// frame list shared by several events and blocks, tags, an expandable segment.
PickleValue full_snapshot() {
  const PickleValue shared = list({frame("a.py", 3, "f"), frame("b.py", 9, "<module>")});
  const PickleValue same_content = list({frame("a.py", 3, "f"), frame("b.py", 9, "<module>")});
  const PickleValue other = list({frame("c.py", 1, "g")});
  PickleValue seg1 = dict({
      {"device", num(1)},
      {"address", num(0x10000)},
      {"total_size", num(4 << 20)},
      {"stream", num(7)},
      {"segment_type", str("large")},
      {"is_expandable", PickleValue{true}},
      {"frames", shared},
      {"blocks", list({dict({{"address", num(0x10000)},
                             {"size", num(2 << 20)},
                             {"requested_size", num(1000)},
                             {"state", str("active_allocated")},
                             {"frames", shared}}),
                       dict({{"size", num(2 << 20)},
                             {"state", str("active_pending_free")},
                             {"frames", list({})}})})},
  });
  PickleValue seg0 =
      dict({{"address", num(0x900000)},
            {"total_size", num(2 << 20)},
            {"segment_type", str("small")},
            {"blocks", list({dict({{"size", num(2 << 20)}, {"state", str("inactive")}})})}});
  PickleValue oom = dict({{"action", str("oom")},
                          {"device_free", num(12345)},
                          {"size", num(std::int64_t{1} << 40)},
                          {"stream", num(7)},
                          {"time_us", num(99)},
                          {"frames", other}});
  return dict({
      {"segments", list({seg0, seg1})},
      {"device_traces",
       list({list({event("alloc", 0x900000, 512, 0)}),
             list({event("segment_alloc", 0x10000, 4 << 20, 7, shared),
                   event("alloc", 0x10000, 1000, 7, shared, "forward"),
                   event("annotate", 0x10000, 0, 7, same_content, "weights"),
                   event("alloc", 0x210000, 5, 9, other, "forward"),
                   event("free_requested", 0x210000, 5, 9), event("free_completed", 0x210000, 5, 9),
                   oom, event("segment_map", 0x410000, 4096, 7),
                   event("segment_unmap", 0x410000, 4096, 7), event("snapshot", 0, 0, 0),
                   event("segment_free", 0x410000, 4096, 11)})})},
      {"allocator_settings", dict({{"PYTORCH_CUDA_ALLOC_CONF", str("expandable_segments:True")}})},
  });
}

TEST(SnapshotFields, EveryActionDeviceAndStream) {
  const TorchSnapshot s = read_torch_snapshot(full_snapshot(), "full");
  ASSERT_EQ(s.device_traces.size(), 2U);
  ASSERT_EQ(s.device_traces[0].size(), 1U);
  const auto& t = s.device_traces[1];
  const std::vector<TraceAction> expected{
      TraceAction::segment_alloc, TraceAction::alloc,          TraceAction::annotate,
      TraceAction::alloc,         TraceAction::free_requested, TraceAction::free_completed,
      TraceAction::oom,           TraceAction::segment_map,    TraceAction::segment_unmap,
      TraceAction::snapshot,      TraceAction::segment_free};
  ASSERT_EQ(t.size(), expected.size());
  for (std::size_t i = 0; i < t.size(); ++i) EXPECT_EQ(t[i].action, expected[i]) << i;
  std::set<StreamId> streams;
  for (const TraceEvent& e : t) streams.insert(e.stream);
  EXPECT_EQ(streams, (std::set<StreamId>{0, 7, 9, 11}));
  EXPECT_EQ(t[6].addr, 12345U);  // oom: the device's free bytes
  EXPECT_EQ(t[6].size, std::uint64_t{1} << 40);
  EXPECT_EQ(t[6].time_us, 99);
  EXPECT_EQ(t[3].time_us, 0x210000 + 5);
  EXPECT_EQ(s.settings, "expandable_segments:True");
}

TEST(SnapshotFields, StacksTagsAndSegments) {
  const TorchSnapshot s = read_torch_snapshot(full_snapshot(), "full");
  const auto& t = s.device_traces[1];
  const StackId shared = t[0].stack;
  ASSERT_NE(shared, 0U);
  EXPECT_EQ(t[1].stack, shared);
  EXPECT_EQ(t[2].stack, shared);  // a different list with the same frames: the same stack
  EXPECT_NE(t[3].stack, shared);
  EXPECT_EQ(t[6].stack, t[3].stack);
  EXPECT_EQ(t[4].stack, 0U);
  EXPECT_EQ(s.strings.stacks.size(), 3U);
  EXPECT_EQ(s.strings.frames.size(), 3U);
  EXPECT_EQ(s.strings.stack_frames(shared),
            (std::vector<TraceFrame>{{"a.py", 3, "f"}, {"b.py", 9, "<module>"}}));
  EXPECT_EQ(s.strings.tags[t[1].tag], "forward");
  EXPECT_EQ(t[3].tag, t[1].tag);
  EXPECT_EQ(s.strings.tags[t[2].tag], "weights");
  EXPECT_EQ(t[0].tag, 0U);  // '' is no tag

  ASSERT_EQ(s.segments.size(), 2U);
  const TorchSegment& small = s.segments[0];
  EXPECT_EQ(small.device, 0);
  EXPECT_FALSE(small.is_expandable);
  EXPECT_TRUE(small.block_stacks.empty());  // no frames recorded
  const TorchSegment& big = s.segments[1];
  EXPECT_EQ(big.device, 1);
  EXPECT_TRUE(big.is_expandable);
  EXPECT_EQ(big.info.stream, 7U);
  EXPECT_EQ(big.block_stacks, (std::vector<StackId>{shared, 0}));
  EXPECT_EQ(big.info.blocks[1].address, 0x10000U + (2U << 20));
  EXPECT_EQ(big.info.blocks[1].state, BlockState::active_pending_free);
}

// Only action and size are required everywhere; addr everywhere but oom.
TEST(SnapshotFields, OptionalFieldsDefault) {
  const TorchSnapshot s = read_torch_snapshot(
      dict({{"segments", list({})},
            {"device_traces",
             list({list({dict({{"action", str("alloc")}, {"addr", num(16)}, {"size", num(8)}}),
                         dict({{"action", str("oom")}, {"size", num(8)}})})})}}),
      "min");
  const TraceEvent& e = s.device_traces.at(0).at(0);
  EXPECT_EQ(e.stream, kDefaultStream);
  EXPECT_EQ(e.time_us, 0);
  EXPECT_EQ(e.stack, 0U);
  EXPECT_EQ(e.tag, 0U);
  EXPECT_EQ(s.device_traces[0][1].addr, 0U);  // an oom without device_free
}

// What memscope's writer adds: rounded sizes and its own settings key.
TEST(SnapshotFields, MemscopeRoundedSizesAndSettings) {
  const TorchSnapshot s = read_torch_snapshot(
      dict({{"segments", list({})},
            {"device_traces", list({list({dict({{"action", str("alloc")},
                                                {"addr", num(16)},
                                                {"size", num(1000)},
                                                {"rounded_size", num(1024)}})})})},
            {"allocator_settings", dict({{"MEMSCOPE_ALLOC_CONF", str("max_split_size:64MiB")}})}}),
      "m");
  EXPECT_EQ(s.device_traces.at(0).at(0).rounded_size, 1024U);
  EXPECT_EQ(s.settings, "max_split_size:64MiB");
}

// A copy of `root` with one field of one event replaced (or added).
PickleValue with_event_field(const char* key, const PickleValue& value) {
  PickleValue e = event("alloc", 0x1000, 8, 0, list({frame("a.py", 1, "f")}), "x");
  std::vector<PickleDict::Item> items = e.get_if<PickleDict>()->items();
  bool replaced = false;
  for (auto& [k, v] : items) {
    if (*k.get_if<std::string>() == key) {
      v = value;
      replaced = true;
    }
  }
  if (!replaced) items.emplace_back(str(key), value);
  return dict(
      {{"segments", list({})},
       {"device_traces",
        list({list({event("alloc", 0x10, 8, 0), PickleValue{PickleDict(std::move(items))}})})}});
}

TEST(SnapshotFields, WrongTypesNameTheFieldPath) {
  const auto error = [](const char* key, PickleValue value) {
    return format_error(
        [&] { (void)read_torch_snapshot(with_event_field(key, value), "s.pickle"); });
  };
  EXPECT_CONTAINS(error("frames", num(3)),
                  "s.pickle: device_traces[0][1].frames: expected list, found int");
  EXPECT_CONTAINS(error("frames", list({num(3)})),
                  "s.pickle: device_traces[0][1].frames[0]: expected dict, found int");
  EXPECT_CONTAINS(error("frames", list({dict({{"line", str("7")}})})),
                  "device_traces[0][1].frames[0].line: expected int, found str");
  EXPECT_CONTAINS(error("frames", list({dict({{"filename", num(7)}})})),
                  "device_traces[0][1].frames[0].filename: expected str, found int");
  EXPECT_CONTAINS(error("user_metadata", PickleValue{}),
                  "device_traces[0][1].user_metadata: expected str, found NoneType");
  EXPECT_CONTAINS(error("stream", num(-1)),
                  "device_traces[0][1].stream: expected a non-negative int, found -1");
  EXPECT_CONTAINS(error("action", str("teleport")),
                  "device_traces[0][1].action: unknown action 'teleport'");
  EXPECT_CONTAINS(error("rounded_size", num(-4)),
                  "device_traces[0][1].rounded_size: expected a non-negative int, found -4");
  EXPECT_CONTAINS(error("time_us", PickleValue{2.5}),
                  "device_traces[0][1].time_us: expected int, found float");
  // device_free is read for oom only (PyTorch writes it there alone).
  EXPECT_NO_THROW((void)read_torch_snapshot(with_event_field("device_free", str("x")), "s"));
  const PickleValue expandable = dict({{"segments", list({dict({{"address", num(0)},
                                                                {"total_size", num(0)},
                                                                {"segment_type", str("large")},
                                                                {"is_expandable", num(1)},
                                                                {"blocks", list({})}})})}});
  EXPECT_CONTAINS(format_error([&] { (void)read_torch_snapshot(expandable, "e"); }),
                  "e: segments[0].is_expandable: expected bool, found int");
  const PickleValue oom = dict(
      {{"segments", list({})},
       {"device_traces",
        list({list(
            {dict({{"action", str("oom")}, {"device_free", str("lots")}, {"size", num(1)}})})})}});
  EXPECT_CONTAINS(format_error([&] { (void)read_torch_snapshot(oom, "o"); }),
                  "o: device_traces[0][0].device_free: expected int, found str");
}

TEST(SnapshotFields, MissingFieldsAreNamed) {
  const PickleValue no_addr =
      dict({{"segments", list({})},
            {"device_traces", list({list({dict({{"action", str("alloc")}, {"size", num(1)}})})})}});
  EXPECT_CONTAINS(format_error([&] { (void)read_torch_snapshot(no_addr, "n"); }),
                  "n: device_traces[0][0]: missing the field 'addr'");
  const PickleValue no_action =
      dict({{"segments", list({})}, {"device_traces", list({list({dict({{"size", num(1)}})})})}});
  EXPECT_CONTAINS(format_error([&] { (void)read_torch_snapshot(no_action, "n"); }),
                  "n: device_traces[0][0]: missing the field 'action'");
}

// ---- Detection and read_trace_file ---------------------------------------------------------

TEST(TraceFormatDetection, ByContent) {
  EXPECT_EQ(detect_trace_format("\x80\x04\x95"), TraceFormat::pickle);
  EXPECT_EQ(detect_trace_format("(dp0\nS'segments'\n"), TraceFormat::pickle);  // protocol 0
  EXPECT_EQ(detect_trace_format("}q\x00."), TraceFormat::pickle);              // protocol 1
  EXPECT_EQ(detect_trace_format("{\"segments\": []}"), TraceFormat::json);
  EXPECT_EQ(detect_trace_format(" \r\n\t[]"), TraceFormat::json);
  EXPECT_EQ(detect_trace_format("\xEF\xBB\xBF{}"), TraceFormat::json);
  EXPECT_EQ(detect_trace_format("Thread,Time,Action,Pointer,Size,Stream\n"), TraceFormat::rmm_log);
  EXPECT_EQ(detect_trace_format("\"Thread\",\"Time\""), TraceFormat::rmm_log);
  EXPECT_EQ(detect_trace_format(""), TraceFormat::unknown);
  EXPECT_EQ(detect_trace_format("hello"), TraceFormat::unknown);
  EXPECT_EQ(detect_trace_format(":x"), TraceFormat::unknown);  // not a pickle opcode
  EXPECT_EQ(detect_trace_format("\x7f"
                                "ELF"),
            TraceFormat::unknown);
}

class TraceFiles : public ::testing::Test {
 protected:
  std::filesystem::path write(const std::string& name, const std::string& bytes) {
    std::filesystem::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("memscope_readers_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(TraceFiles, EachFormatIsReadWhateverItsName) {
  MEMSCOPE_TRACE_OR_SKIP(real, corpus::kSmallTrainStep);
  const TorchSnapshot p = read_trace_file(real);
  EXPECT_EQ(p.device_traces.at(0).size(), 5163U);
  const TorchSnapshot j = read_trace_file(
      write("a.pickle", R"({"segments": [], "device_traces": [[{"action": "alloc", "addr": 16,
                                                                  "size": 8}]]})"));
  EXPECT_EQ(j.device_traces.at(0).at(0).addr, 16U);
  const TorchSnapshot r = read_trace_file(
      write("b.json", "Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.5,free,0x20,8,0x3\n"));
  EXPECT_EQ(r.device_traces.at(0).at(0).action, TraceAction::free_completed);
  EXPECT_EQ(r.device_traces[0][0].stream, 3U);
}

TEST_F(TraceFiles, UnknownOrUnreadableFilesSayWhatIsAccepted) {
  const std::string unknown = format_error([&] {
    (void)read_trace_file(write("x.bin",
                                "\x7f"
                                "ELF\x02\x01"));
  });
  EXPECT_CONTAINS(unknown,
                  "x.bin: not a trace: binary data of no format memscope knows (first "
                  "bytes 7f 45 4c 46");
  EXPECT_CONTAINS(unknown, "PyTorch memory snapshot pickle");
  EXPECT_CONTAINS(unknown, "JSON snapshot");
  EXPECT_CONTAINS(unknown, "Thread,Time,Action,Pointer,Size,Stream");
  // A script given for a trace: 'i', 'd' and 'c' are pickle opcodes, so these were read as
  // protocol-0 pickles and refused for an opcode.
  for (const char* script : {"import torch\nx = 1\n", "def main():\n  pass\n", "class M:\n  pass\n",
                             "#!/usr/bin/env python3\n"}) {
    const std::string message =
        format_error([&] { (void)read_trace_file(write("some.py", script)); });
    EXPECT_CONTAINS(message, "some.py: not a trace: it looks like Python source (first line '");
    EXPECT_CONTAINS(message, "PyTorch memory snapshot pickle");
  }
  EXPECT_CONTAINS(format_error([&] { (void)read_trace_file(write("notes.txt", "hello\n")); }),
                  "notes.txt: not a trace: it looks like text (first line 'hello')");
  EXPECT_CONTAINS(format_error([&] { (void)read_trace_file(write("e", "")); }),
                  "the file is empty");
  EXPECT_CONTAINS(format_error([&] { (void)read_trace_file(dir_ / "missing.pickle"); }),
                  "cannot read");
  // The format's own reader explains what is wrong inside it.
  EXPECT_CONTAINS(format_error([&] { (void)read_trace_file(write("t.json", "{\"segments\": [")); }),
                  "t.json: not valid JSON at byte");
}

}  // namespace
}  // namespace memscope
