// Snapshot writers: exact pickle bytes for small values (as Python's pickle.dumps writes them),
// a seeded random snapshot read back by memscope's reader, Python's own pickle reading and
// re-writing the very same bytes, JSON, and the atomic write (typed errors, no file left
// behind, a previous file kept whole when a write fails).
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/utf8.hpp"
#include "memscope/errors.hpp"
#include "memscope/trace.hpp"
#include "pickle_test_util.hpp"
#include "trace/pickle_writer.hpp"
#include "trace_corpus.hpp"

namespace memscope {
namespace {

namespace fs = std::filesystem;
using detail::PickleWriter;
using testing::bytes;
using testing::cat;
using testing::le;

// ---- Exact bytes ------------------------------------------------------------------------
// The expected bytes are what `pickle.dumps(value, protocol=p)` gives in CPython 3.11.

TEST(PickleWriter, IntegersTakeTheShortestOpcodePythonUses) {
  const auto one = [](std::int64_t v) {
    PickleWriter w(2);
    w.integer(v);
    return w.finish();
  };
  EXPECT_EQ(one(0), bytes({0x80, 2, 'K', 0, '.'}));
  EXPECT_EQ(one(255), bytes({0x80, 2, 'K', 255, '.'}));
  EXPECT_EQ(one(256), bytes({0x80, 2, 'M', 0, 1, '.'}));
  EXPECT_EQ(one(65536), cat(bytes({0x80, 2, 'J'}), le(65536, 4), "."));
  EXPECT_EQ(one(-1), bytes({0x80, 2, 'J', 0xff, 0xff, 0xff, 0xff, '.'}));
  // pickle.dumps(2**31, 2) == b'\x80\x02\x8a\x05\x00\x00\x00\x80\x00.'
  EXPECT_EQ(one(1LL << 31), bytes({0x80, 2, 0x8a, 5, 0, 0, 0, 0x80, 0, '.'}));
  // pickle.dumps(-2**31 - 1, 2) == b'\x80\x02\x8a\x05\xff\xff\xff\x7f\xff.'
  EXPECT_EQ(one(-(1LL << 31) - 1), bytes({0x80, 2, 0x8a, 5, 0xff, 0xff, 0xff, 0x7f, 0xff, '.'}));
  // A 47-bit device address: six bytes.
  EXPECT_EQ(one(0x7f0012345678), bytes({0x80, 2, 0x8a, 6, 0x78, 0x56, 0x34, 0x12, 0, 0x7f, '.'}));
  PickleWriter big(2);
  big.natural(1ULL << 63);  // pickle.dumps(2**63, 2): nine bytes, the last a zero sign byte
  EXPECT_EQ(big.finish(), bytes({0x80, 2, 0x8a, 9, 0, 0, 0, 0, 0, 0, 0, 0x80, 0, '.'}));
}

TEST(PickleWriter, StringsAreMemoizedAndFetchedOnceSeen) {
  // pickle.dumps(['a', 'a'], 2) == b'\x80\x02]q\x00(X\x01\x00\x00\x00aq\x01h\x01e.'
  PickleWriter w2(2);
  w2.begin_list(2);
  w2.text("a");
  w2.text("a");
  EXPECT_EQ(w2.finish(), cat(bytes({0x80, 2, ']', 'q', 0, '(', 'X', 1, 0, 0, 0, 'a', 'q', 1}),
                             bytes({'h', 1, 'e', '.'})));
  // Protocol 4: a frame, SHORT_BINUNICODE and MEMOIZE. pickle.dumps({'k': 'v'}, 4) ==
  // b'\x80\x04\x95\x0c\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x01k\x94\x8c\x01v\x94s.'
  PickleWriter w4(4);
  w4.begin_dict(1);
  w4.text("k");
  w4.text("v");
  EXPECT_EQ(w4.finish(), cat(bytes({0x80, 4, 0x95}), le(12, 8),
                             bytes({'}', 0x94, 0x8c, 1, 'k', 0x94, 0x8c, 1, 'v', 0x94, 's', '.'})));
}

TEST(PickleWriter, TuplesBatchesAndTinyFramesFollowPython) {
  PickleWriter pair(2);  // pickle.dumps((0, 0), 2) == b'\x80\x02K\x00K\x00\x86q\x00.'
  pair.pair(0, 0);
  EXPECT_EQ(pair.finish(), bytes({0x80, 2, 'K', 0, 'K', 0, 0x86, 'q', 0, '.'}));

  PickleWriter tiny(4);  // under four bytes in the frame: no FRAME (pickle.dumps(None, 4))
  tiny.none();
  EXPECT_EQ(tiny.finish(), bytes({0x80, 4, 'N', '.'}));

  // 1001 items: a batch of 1000, then a batch of one, still MARK ... APPENDS.
  PickleWriter list(2);
  list.begin_list(1001);
  for (int i = 0; i < 1001; ++i) list.integer(0);
  const std::string l = list.finish();
  EXPECT_EQ(l.substr(l.size() - 6), bytes({'e', '(', 'K', 0, 'e', '.'}));
  // A dict of exactly 1000 items ends with an empty batch "(u", as Python's does.
  PickleWriter dict(2);
  dict.begin_dict(1000);
  for (int i = 0; i < 1000; ++i) {
    dict.integer(i);
    dict.integer(0);
  }
  const std::string d = dict.finish();
  EXPECT_EQ(d.substr(d.size() - 4), bytes({'u', '(', 'u', '.'}));
}

TEST(PickleWriter, InvalidUtf8IsReplacedNotWritten) {
  PickleWriter w(2);
  w.text(std::string("a\xff") + "b\xe2\x82");  // a stray byte and a truncated sequence
  const PickleValue v = read_pickle(w.finish());
  ASSERT_NE(v.get_if<std::string>(), nullptr);
  EXPECT_EQ(*v.get_if<std::string>(),
            "a\xef\xbf\xbd"
            "b\xef\xbf\xbd\xef\xbf\xbd");
}

TEST(Utf8, ValidTextPassesAndEachBadByteBecomesOneReplacement) {
  const std::string r = "\xEF\xBF\xBD";
  for (const char* ok : {"", "plain", "\xC3\xBC", "\xE2\x82\xAC", "\xF0\x9F\x98\x80"}) {
    EXPECT_TRUE(detail::is_valid_utf8(ok)) << ok;
    EXPECT_EQ(detail::valid_utf8(ok), ok);
  }
  const std::pair<std::string, std::string> bad[] = {
      {"\xC0\xAF", r + r},                  // overlong '/'
      {"\xED\xA0\x80", r + r + r},          // a surrogate
      {"\xF4\x90\x80\x80", r + r + r + r},  // past U+10FFFF
      {"a\xE2\x82", "a" + r + r},           // cut short at the end
      {"\x80x", r + "x"},                   // a stray continuation byte
  };
  for (const auto& [in, out] : bad) {
    EXPECT_FALSE(detail::is_valid_utf8(in)) << in;
    EXPECT_EQ(detail::valid_utf8(in), out) << in;
  }
}

TEST(PickleWriter, ProtocolsOutsideTwoToFourAreUsageErrors) {
  for (const int p : {-1, 0, 1, 5, 6}) {
    try {
      (void)torch_snapshot_pickle(TorchSnapshot{}, p);
      ADD_FAILURE() << "protocol " << p << " accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("use 2, 3 or 4"), std::string::npos) << e.what();
    }
  }
}

// ---- A random snapshot ------------------------------------------------------------------

TorchSnapshot random_snapshot(std::uint32_t seed, bool all_actions) {
  std::mt19937_64 rng(seed);
  const auto pick = [&](std::uint64_t lo, std::uint64_t hi) {
    return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
  };
  TorchSnapshot s;
  std::vector<StackId> stacks{0};
  for (int i = 0; i < 40; ++i) {
    std::vector<TraceFrame> frames;
    for (std::uint64_t f = pick(1, 8); f > 0; --f) {
      frames.push_back({"/src/model_" + std::to_string(pick(0, 9)) + ".py",
                        static_cast<std::int64_t>(pick(1, 900)),
                        "fn_" + std::to_string(pick(0, 30))});
    }
    stacks.push_back(s.strings.intern_stack(frames));
  }
  // Text JSON must escape and bytes that are not UTF-8 (both writers replace them).
  const TagId tags[] = {0, s.strings.intern_tag("train"), s.strings.intern_tag("eval/step ü"),
                        s.strings.intern_tag("q\"b\\s\n\t\x01 bad\xff")};
  std::uint64_t address = 0x7f0000000000;
  for (int i = 0; i < 30; ++i) {
    TorchSegment seg;
    seg.device = static_cast<std::int64_t>(pick(0, 2));
    seg.is_expandable = all_actions && pick(0, 3) == 0;
    SegmentInfo& info = seg.info;
    info.address = address;
    info.small_pool = pick(0, 1) == 1;
    info.stream = pick(0, 4) == 0 ? pick(1, 1ULL << 40) : 0;
    for (std::uint64_t b = pick(1, 12); b > 0; --b) {
      BlockInfo block;
      block.address = address;
      block.size = 512 * pick(1, 5000);
      block.state = static_cast<BlockState>(pick(0, 2));
      block.requested_size = block.state == BlockState::inactive ? 0 : pick(1, block.size);
      if (block.state == BlockState::active_allocated) info.allocated_size += block.size;
      if (block.state != BlockState::inactive) {
        info.active_size += block.size;
        info.requested_size += block.requested_size;
      }
      info.blocks.push_back(block);
      seg.block_stacks.push_back(stacks[pick(0, stacks.size() - 1)]);
      address += block.size;
      info.total_size += block.size;
    }
    address += 1ULL << 21;
    s.segments.push_back(std::move(seg));
  }
  s.device_traces.resize(2);  // the segments name device 2 as well: the writer pads
  const TraceAction plain[] = {
      TraceAction::alloc,         TraceAction::free_requested, TraceAction::free_completed,
      TraceAction::segment_alloc, TraceAction::segment_free,   TraceAction::segment_map,
      TraceAction::segment_unmap, TraceAction::snapshot,       TraceAction::empty_cache};
  for (auto& trace : s.device_traces) {
    for (int i = 0; i < 3000; ++i) {
      TraceEvent e;
      e.action = all_actions && pick(0, 50) == 0 ? TraceAction::oom : plain[pick(0, 8)];
      e.addr = pick(0, 1ULL << 48);
      e.size = pick(0, 1) == 0 ? pick(1, 300) : pick(1, 1ULL << 36);
      e.stream = pick(0, 3) == 0 ? pick(1, 1ULL << 40) : 0;
      e.time_us = static_cast<std::int64_t>(pick(0, 1ULL << 50));
      if (all_actions) {
        e.rounded_size = pick(0, 1) == 0 ? 0 : e.size + pick(0, 511);
        e.stack = stacks[pick(0, stacks.size() - 1)];
        e.tag = tags[pick(0, 3)];
      }
      trace.push_back(e);
    }
  }
  s.settings = "max_split_size:200MiB";
  return s;
}

// What the present reader keeps: segments, blocks and the events' core fields.
void expect_core_equal(const TorchSnapshot& want, const TorchSnapshot& got) {
  ASSERT_EQ(got.segments.size(), want.segments.size());
  for (std::size_t i = 0; i < want.segments.size(); ++i) {
    const SegmentInfo& a = want.segments[i].info;
    const SegmentInfo& b = got.segments[i].info;
    SCOPED_TRACE("segment " + std::to_string(i));
    EXPECT_EQ(got.segments[i].device, want.segments[i].device);
    EXPECT_EQ(b.address, a.address);
    EXPECT_EQ(b.total_size, a.total_size);
    EXPECT_EQ(b.allocated_size, a.allocated_size);
    EXPECT_EQ(b.active_size, a.active_size);
    EXPECT_EQ(b.requested_size, a.requested_size);
    EXPECT_EQ(b.stream, a.stream);
    EXPECT_EQ(b.small_pool, a.small_pool);
    ASSERT_EQ(b.blocks.size(), a.blocks.size());
    for (std::size_t k = 0; k < a.blocks.size(); ++k) {
      EXPECT_EQ(b.blocks[k].address, a.blocks[k].address);
      EXPECT_EQ(b.blocks[k].size, a.blocks[k].size);
      EXPECT_EQ(b.blocks[k].requested_size, a.blocks[k].requested_size);
      EXPECT_EQ(b.blocks[k].state, a.blocks[k].state);
    }
  }
  // One list per device up to the highest segment device (here 2); the padding is empty.
  ASSERT_EQ(got.device_traces.size(), 3U);
  EXPECT_TRUE(got.device_traces[2].empty());
  for (std::size_t d = 0; d < want.device_traces.size(); ++d) {
    ASSERT_EQ(got.device_traces[d].size(), want.device_traces[d].size());
    for (std::size_t i = 0; i < want.device_traces[d].size(); ++i) {
      const TraceEvent& a = want.device_traces[d][i];
      const TraceEvent& b = got.device_traces[d][i];
      SCOPED_TRACE("event " + std::to_string(d) + "/" + std::to_string(i));
      EXPECT_EQ(b.action, a.action);
      EXPECT_EQ(b.addr, a.addr);
      EXPECT_EQ(b.size, a.size);
      EXPECT_EQ(b.stream, a.stream);
      EXPECT_EQ(b.time_us, a.time_us);
    }
  }
}

TEST(SnapshotWriter, RandomSnapshotReadsBackInEveryProtocol) {
  const TorchSnapshot s = random_snapshot(11, false);
  for (const int protocol : {2, 3, 4}) {
    SCOPED_TRACE("protocol " + std::to_string(protocol));
    const std::string pickle = torch_snapshot_pickle(s, protocol);
    expect_core_equal(s, read_torch_snapshot(read_pickle(pickle, "written"), "written"));
  }
}

// Frames, tags, rounded sizes, expandable segments and OOM events: the reader keeps them once
// it reads the whole data model (issue 11's reader work); until then the check is skipped.
TEST(SnapshotWriter, RandomSnapshotKeepsFramesTagsAndEveryAction) {
  const TorchSnapshot s = random_snapshot(12, true);
  TorchSnapshot got;
  try {
    got = read_torch_snapshot(read_pickle(torch_snapshot_pickle(s, 4), "written"), "written");
  } catch (const TraceFormatError& e) {
    GTEST_SKIP() << "the reader does not read every field the writer writes yet: " << e.what();
  }
  if (got.strings.frames.empty()) GTEST_SKIP() << "the reader does not keep frames yet";
  expect_core_equal(s, got);
  for (std::size_t d = 0; d < s.device_traces.size(); ++d) {
    for (std::size_t i = 0; i < s.device_traces[d].size(); ++i) {
      const TraceEvent& a = s.device_traces[d][i];
      const TraceEvent& b = got.device_traces[d][i];
      SCOPED_TRACE("event " + std::to_string(d) + "/" + std::to_string(i));
      EXPECT_EQ(got.strings.stack_frames(b.stack), s.strings.stack_frames(a.stack));
      // Text that is not UTF-8 comes back with U+FFFD in place of the bad bytes.
      EXPECT_EQ(got.strings.tags.at(b.tag), detail::valid_utf8(s.strings.tags.at(a.tag)));
    }
  }
  for (std::size_t i = 0; i < s.segments.size(); ++i) {
    EXPECT_EQ(got.segments[i].is_expandable, s.segments[i].is_expandable);
    for (std::size_t k = 0; k < s.segments[i].block_stacks.size(); ++k) {
      EXPECT_EQ(got.strings.stack_frames(got.segments[i].block_stacks.at(k)),
                s.strings.stack_frames(s.segments[i].block_stacks[k]));
    }
  }
}

// memscope's own field: readers that know it get it back.
TEST(SnapshotWriter, RoundedSizesReadBackWhenTheReaderKnowsThem) {
  const TorchSnapshot s = random_snapshot(16, false);
  TorchSnapshot with = s;
  std::mt19937 rng(16);
  for (auto& trace : with.device_traces) {
    for (TraceEvent& e : trace) e.rounded_size = e.size + rng() % 512;
  }
  const TorchSnapshot got =
      read_torch_snapshot(read_pickle(torch_snapshot_pickle(with), "written"), "written");
  bool any = false;
  for (const auto& trace : got.device_traces) {
    for (const TraceEvent& e : trace) any = any || e.rounded_size != 0;
  }
  if (!any) GTEST_SKIP() << "the reader does not read rounded_size yet";
  for (std::size_t d = 0; d < with.device_traces.size(); ++d) {
    for (std::size_t i = 0; i < with.device_traces[d].size(); ++i) {
      EXPECT_EQ(got.device_traces[d][i].rounded_size, with.device_traces[d][i].rounded_size);
    }
  }
}

TEST(SnapshotWriter, FramesAreWrittenOnceAndShared) {
  const TorchSnapshot s = random_snapshot(13, true);
  const std::string pickle = torch_snapshot_pickle(s, 4);
  // Each distinct frame's function name appears once in the bytes, however many events use it.
  for (const TraceFrame& f : s.strings.frames) {
    const std::string needle = cat(bytes({0x8c, static_cast<unsigned>(f.name.size())}), f.name);
    const auto first = pickle.find(needle);
    ASSERT_NE(first, std::string::npos) << f.name;
    EXPECT_EQ(pickle.find(needle, first + 1), std::string::npos) << f.name;
  }
  // And the JSON, which cannot share, is several times larger.
  EXPECT_GT(torch_snapshot_json(s).size(), 3 * pickle.size());
}

TEST(SnapshotWriter, JsonHasTorchsKeysAndReadsBackWhenTheReaderExists) {
  const TorchSnapshot s = random_snapshot(14, true);
  const std::string json = torch_snapshot_json(s);
  for (const char* key : {"\"segments\":[{\"device\":", "\"segment_pool_id\":[0,0]",
                          "\"device_free\":", "\"user_metadata\":\"eval/step ü\"",
                          "\"allocator_settings\":{\"MEMSCOPE_ALLOC_CONF\":"}) {
    EXPECT_NE(json.find(key), std::string::npos) << key;
  }
  TorchSnapshot got;
  try {
    got = read_torch_snapshot_json(json, "written.json");
  } catch (const UsageError& e) {
    GTEST_SKIP() << "no JSON reader yet: " << e.what();
  }
  expect_core_equal(s, got);
}

TEST(SnapshotWriter, BadReferencesInTheModelAreUsageErrors) {
  TorchSnapshot s = random_snapshot(15, true);
  s.device_traces[1][7].stack = 100000;
  EXPECT_THROW((void)torch_snapshot_pickle(s), UsageError);
  s = random_snapshot(15, true);
  s.device_traces[0][3].tag = 99;
  try {
    (void)torch_snapshot_json(s);
    ADD_FAILURE() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("device_traces[0][3].tag"), std::string::npos);
  }
  s = random_snapshot(15, true);
  s.segments[4].device = -1;
  EXPECT_THROW((void)torch_snapshot_pickle(s), UsageError);
}

// ---- Python reads and re-writes the very same bytes ---------------------------------------

TEST(SnapshotWriter, PythonsPickleReadsAndRewritesTheSameBytes) {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): the test runs alone
  if (std::system("python3 -c 'import pickle' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3 is not available";
  }
  const fs::path dir =
      fs::temp_directory_path() / ("memscope_writer_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::vector<fs::path> files;
  for (const std::uint32_t seed : {21U, 22U, 23U}) {
    TorchSnapshot s = random_snapshot(seed, true);
    // A str larger than a frame, which Python writes outside the frames.
    s.device_traces[0][0].tag = s.strings.intern_tag(std::string(70000, 't'));
    for (const int protocol : {2, 3, 4}) {
      files.push_back(dir / ("s" + std::to_string(seed) + "_" + std::to_string(protocol)));
      std::ofstream(files.back(), std::ios::binary) << torch_snapshot_pickle(s, protocol);
    }
    std::ofstream(files.back().string() + ".json", std::ios::binary) << torch_snapshot_json(s);
  }
  std::string command =
      "python3 -c 'import json,pickle,sys\n"
      "for n in sys.argv[1:]:\n"
      "    b = open(n, \"rb\").read()\n"
      "    d = pickle.loads(b)\n"
      "    assert isinstance(d[\"segments\"], list) and d[\"device_traces\"], n\n"
      "    assert pickle.dumps(d, protocol=b[1]) == b, n + \": not the bytes Python writes\"\n"
      "    if b[1] == 4:\n"  // the JSON is the same dict, tuples as lists
      "        j = json.load(open(n + \".json\", encoding=\"utf-8\"))\n"
      "        assert j == json.loads(json.dumps(d)), n + \".json: not the pickled dict\"\n'";
  for (const fs::path& f : files) command += " " + f.string();
  EXPECT_EQ(std::system(command.c_str()), 0);  // NOLINT(concurrency-mt-unsafe)
  fs::remove_all(dir);
}

// PyTorch's own snapshot (the corpus's small train step), read by memscope and written back, is the
// dict PyTorch wrote, but for what memscope does not keep: compile_context ("N/A"), empty
// user_metadata, external_annotations and PyTorch's allocator_settings.
TEST(SnapshotWriter, APyTorchSnapshotIsWrittenBackAsPyTorchWroteIt) {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): the test runs alone
  if (std::system("python3 -c 'import pickle' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3 is not available";
  }
  MEMSCOPE_TRACE_OR_SKIP(real, corpus::kSmallTrainStep);
  const TorchSnapshot s = read_torch_snapshot_file(real);
  if (s.strings.frames.empty()) GTEST_SKIP() << "the reader does not keep frames yet";
  const fs::path ours =
      fs::temp_directory_path() / ("memscope_writer_real_" + std::to_string(getpid()) + ".pickle");
  write_torch_snapshot(s, ours);
  const std::string command =
      "python3 -c 'import pickle,sys\n"
      "theirs = pickle.load(open(sys.argv[1], \"rb\"))\n"
      "ours = pickle.load(open(sys.argv[2], \"rb\"))\n"
      "for k in (\"external_annotations\", \"allocator_settings\"):\n"
      "    theirs.pop(k, None); ours.pop(k, None)\n"
      "for e in theirs[\"device_traces\"][0]:\n"
      "    e.pop(\"compile_context\")\n"
      "    if e[\"user_metadata\"] == \"\": del e[\"user_metadata\"]\n"
      "assert ours[\"segments\"] == theirs[\"segments\"], \"segments differ\"\n"
      "assert ours == theirs, \"device traces differ\"\n' " +
      real.string() + " " + ours.string();
  EXPECT_EQ(std::system(command.c_str()), 0);  // NOLINT(concurrency-mt-unsafe)
  fs::remove(ours);
}

// ---- Atomic files -----------------------------------------------------------------------

class AtomicWrite : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() /
          ("memscope_atomic_" + std::to_string(getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  static std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  fs::path dir;
};

TEST_F(AtomicWrite, FormatFollowsTheExtension) {
  const TorchSnapshot s = random_snapshot(31, false);
  write_torch_snapshot(s, dir / "a.pickle");
  write_torch_snapshot(s, dir / "b.JSON");
  write_torch_snapshot(s, dir / "c");
  EXPECT_EQ(slurp(dir / "a.pickle"), torch_snapshot_pickle(s, 4));
  EXPECT_EQ(slurp(dir / "c"), torch_snapshot_pickle(s, 4));
  EXPECT_EQ(slurp(dir / "b.JSON"), torch_snapshot_json(s));
  expect_core_equal(s, read_torch_snapshot_file(dir / "a.pickle"));
  EXPECT_EQ(names(), (std::vector<std::string>{"a.pickle", "b.JSON", "c"}));
}

TEST_F(AtomicWrite, UnwritablePlacesAreTypedErrorsNamingThePath) {
  const TorchSnapshot s = random_snapshot(32, false);
  std::ofstream(dir / "plain_file") << "x";
  // A folder that is a file (fails even for root), and a folder that does not exist.
  for (const fs::path& target : {dir / "plain_file" / "snap.pickle", dir / "no" / "snap.pickle"}) {
    try {
      write_torch_snapshot(s, target);
      ADD_FAILURE() << "wrote " << target;
    } catch (const BackendError& e) {
      EXPECT_NE(std::string(e.what()).find(target.string()), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(names(), std::vector<std::string>{"plain_file"});
  EXPECT_THROW(write_torch_snapshot(s, ""), UsageError);
}

// The file-size limit makes write() itself fail (EFBIG) halfway through, as a full disk would.
TEST_F(AtomicWrite, AFailedWriteKeepsThePreviousFileWhole) {
  const TorchSnapshot small = random_snapshot(33, false);
  TorchSnapshot big = random_snapshot(34, true);
  const fs::path target = dir / "snap.pickle";
  write_torch_snapshot(small, target);
  const std::string before = slurp(target);
  const std::size_t limit = before.size() + 4096;
  ASSERT_GT(torch_snapshot_pickle(big).size(), limit);

  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit low = old;
  low.rlim_cur = limit;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &low), 0);
  std::string message;
  try {
    write_torch_snapshot(big, target);
  } catch (const BackendError& e) {
    message = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(message.find("cannot write"), std::string::npos) << message;
  EXPECT_EQ(slurp(target), before);
  EXPECT_EQ(names(), std::vector<std::string>{"snap.pickle"});  // no temporary file left

  // A snapshot the writer refuses fails before any file is touched.
  big.device_traces[0][0].stack = 1U << 30;
  EXPECT_THROW(write_torch_snapshot(big, target), UsageError);
  EXPECT_EQ(slurp(target), before);
  EXPECT_EQ(names(), std::vector<std::string>{"snap.pickle"});
}

}  // namespace
}  // namespace memscope
