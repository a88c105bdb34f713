// RMM allocation logs (rmm::mr::logging_resource_adaptor): every variant RMM versions write,
// a generated fixed-seed log read back event by event and replayed, and each kind of bad input
// refused with a message naming the line, the column and what was expected.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "many_streams_log.hpp"  // bench/: the log of bench/oom_replay.cpp
#include "memscope/trace.hpp"
#include "memscope/units.hpp"
#include "pickle_test_util.hpp"

namespace memscope {
namespace {

constexpr const char* kHeader = "Thread,Time,Action,Pointer,Size,Stream\n";

std::string hex(std::uint64_t v) {
  char out[32];
  std::snprintf(out, sizeof out, "0x%llx", static_cast<unsigned long long>(v));
  return out;
}

std::int64_t at(int h, int m, int s, int us) {
  return ((std::int64_t{h} * 60 + m) * 60 + s) * 1'000'000 + us;
}

TEST(RmmLog, ReadsEventsAsRmmWritesThem) {
  // fmt's pointers and streams (RMM up to 24.x).
  const TorchSnapshot s = read_rmm_log(std::string(kHeader) +
                                           "1979932,14:21:19.998533,allocate,0x30a000000,256,0x2\n"
                                           "1980043,14:21:32.661875,free,0x30a000000,256,0x2\n",
                                       "rmm.csv");
  EXPECT_TRUE(s.segments.empty());
  ASSERT_EQ(s.device_traces.size(), 1U);
  const auto& t = s.device_traces[0];
  ASSERT_EQ(t.size(), 2U);
  EXPECT_EQ(t[0].action, TraceAction::alloc);
  EXPECT_EQ(t[0].addr, 0x30a000000U);
  EXPECT_EQ(t[0].size, 256U);
  EXPECT_EQ(t[0].stream, 2U);
  EXPECT_EQ(t[0].time_us, at(14, 21, 19, 998533));
  EXPECT_EQ(t[1].action, TraceAction::free_completed);
  EXPECT_EQ(t[1].time_us, at(14, 21, 32, 661875));
}

TEST(RmmLog, EveryVariant) {
  const TorchSnapshot s =
      read_rmm_log(std::string(kHeader) +
                       // %llx: bare hex; the default stream "0"
                       "2342727,15:47:02.841961,allocate,10012400000,1048576,0\n"
                       // allocate failure: %p's "(nil)", then fmt's "0x0"
                       "7,23:59:59.999999,allocate failure,(nil),99999999999,7f8a38001020\n"
                       "7,23:59:59.999999,allocate failure,0x0,5,0x0\n"
                       // past midnight: the clock goes on
                       "7,00:00:00.000001,free,0x10012400000,1048576,0X0\n"
                       // no fraction; an unparseable time is 0
                       "7,00:00:01,allocate,0xA,1,0\n"
                       "7,yesterday,free,0xa,1,0\n",
                   "v.csv");
  const auto& t = s.device_traces.at(0);
  ASSERT_EQ(t.size(), 6U);
  EXPECT_EQ(t[0].addr, 0x10012400000U);
  EXPECT_EQ(t[0].stream, 0U);
  EXPECT_EQ(t[1].action, TraceAction::oom);
  EXPECT_EQ(t[1].size, 99999999999U);
  EXPECT_EQ(t[1].addr, 0U);  // RMM does not log the device's free bytes
  EXPECT_EQ(t[1].stream, 0x7f8a38001020U);
  EXPECT_EQ(t[2].action, TraceAction::oom);
  EXPECT_EQ(t[3].time_us, at(24, 0, 0, 1));
  EXPECT_EQ(t[4].time_us, at(24, 0, 1, 0));
  EXPECT_EQ(t[4].addr, 10U);
  EXPECT_EQ(t[5].time_us, 0);
  EXPECT_EQ(t[5].action, TraceAction::free_completed);
}

TEST(RmmLog, QuotesCrlfBlankLinesAndRepeatedHeaders) {
  const TorchSnapshot s = read_rmm_log(
      "\xEF\xBB\xBF\"Thread\",\"Time\",\"Action\",\"Pointer\",\"Size\",\"Stream\"\r\n"
      "\"1\",\"10:00:00.000001\",\"allocate\",\"0x1000\",\"512\",\"0x5\"\r\n"
      "\r\n"
      "Thread,Time,Action,Pointer,Size,Stream\r\n"  // a second adaptor on the same file
      " 1 , 10:00:00.000002 , free , 0x1000 , 512 , 0x5 \r\n"
      "\r\n",
      "q.csv");
  const auto& t = s.device_traces.at(0);
  ASSERT_EQ(t.size(), 2U);
  EXPECT_EQ(t[0].addr, 0x1000U);
  EXPECT_EQ(t[0].stream, 5U);
  EXPECT_EQ(t[1].action, TraceAction::free_completed);
  EXPECT_EQ(t[1].time_us, at(10, 0, 0, 2));
  // Seconds since the epoch, as RMM's documentation shows them; columns found by name.
  const TorchSnapshot e = read_rmm_log(
      "Time,Thread,Action,Pointer,Size,Stream\n"
      "1634567890.123456,140573312345856,allocate,0x7f8a40000000,1024,0x7f8a38001020\n",
      "e.csv");
  EXPECT_EQ(e.device_traces.at(0).at(0).time_us, 1634567890123456);
  EXPECT_EQ(e.device_traces[0][0].size, 1024U);
}

// A generated log: allocations and frees on four streams, some failures, in RMM's format; read
// back event by event, then replayed, ending with exactly the bytes still allocated.
TEST(RmmLog, GeneratedLogReadsBackAndReplays) {
  std::mt19937_64 rng(11);
  std::string csv = kHeader;
  std::vector<TraceEvent> expected;
  std::map<std::uint64_t, std::uint64_t> live;  // address -> size
  std::uint64_t next_addr = 0x7f0000000000;
  for (int i = 0; i < 5000; ++i) {
    TraceEvent e;
    e.stream = rng() % 4 == 0 ? 0 : 0x55550000 + rng() % 3;
    e.time_us = at(9, 0, 0, 0) + std::int64_t{i} * 37;
    const std::uint64_t roll = rng() % 100;
    if (roll < 3) {
      e.action = TraceAction::oom;
      e.size = std::uint64_t{1} << (40 + rng() % 8);
    } else if (roll < 55 || live.empty()) {
      e.action = TraceAction::alloc;
      e.size = 1 + rng() % (std::uint64_t{1} << (rng() % 28));
      e.addr = next_addr;
      next_addr += (e.size + 511) / 512 * 512;
      live[e.addr] = e.size;
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<std::ptrdiff_t>(rng() % live.size()));
      e.action = TraceAction::free_completed;
      e.addr = it->first;
      e.size = it->second;
      live.erase(it);
    }
    const std::int64_t us = e.time_us % 1'000'000, secs = e.time_us / 1'000'000;
    const char* action = e.action == TraceAction::alloc            ? "allocate"
                         : e.action == TraceAction::free_completed ? "free"
                                                                   : "allocate failure";
    char line[200];
    std::snprintf(line, sizeof line, "%d,%02lld:%02lld:%02lld.%06lld,%s,%s,%llu,%s\n",
                  1000 + static_cast<int>(rng() % 4), static_cast<long long>(secs / 3600),
                  static_cast<long long>(secs / 60 % 60), static_cast<long long>(secs % 60),
                  static_cast<long long>(us), action,
                  e.action == TraceAction::oom ? "(nil)" : hex(e.addr).c_str(),
                  static_cast<unsigned long long>(e.size),
                  e.stream == 0 ? "0" : hex(e.stream).c_str());
    csv += line;
    expected.push_back(e);
  }
  const TorchSnapshot s = read_rmm_log(csv, "generated.csv");
  const auto& t = s.device_traces.at(0);
  ASSERT_EQ(t.size(), expected.size());
  for (std::size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(t[i].action, expected[i].action) << "event " << i;
    EXPECT_EQ(t[i].addr, expected[i].addr) << "event " << i;
    EXPECT_EQ(t[i].size, expected[i].size) << "event " << i;
    EXPECT_EQ(t[i].stream, expected[i].stream) << "event " << i;
    EXPECT_EQ(t[i].time_us, expected[i].time_us) << "event " << i;
  }
  std::uint64_t live_bytes = 0;
  for (const auto& [addr, size] : live) live_bytes += size;
  const ReplayPlan plan = build_replay_plan(s);
  EXPECT_EQ(plan.live_at_end, live_bytes);
  EXPECT_EQ(plan.starting_blocks(), 0U);
  const ReplayResult r = replay(plan);
  EXPECT_EQ(r.num_ooms, 0);
  EXPECT_GE(r.peak_reserved, r.peak_requested);
}

// The log of bench/oom_replay.cpp at a test size, past the device's capacity: each stream's
// 1-7 KiB takes a 2 MiB segment (or page) of its own, and after every 7th stream s stream s / 2
// frees its block. Refusals skip their walk over the streams while nothing was freed (issue
// 44); the outcome must be what a model of the rules gives: a stream fits while the device has
// room for its segment, else after a release of every whole cached one, else it is refused.
// Costs about 0.1 s.
TEST(RmmLog, ManyStreamsPastTheCapacityRefuseWhatTheRulesSay) {
  constexpr std::size_t kStreams = 3000;
  constexpr std::size_t kFreeEvery = 7;
  constexpr std::size_t kCapacity = 1 * GiB;
  constexpr std::size_t kSegment = 2 * MiB;
  const TorchSnapshot s =
      read_rmm_log(bench::many_streams_rmm_log(kStreams, kFreeEvery), "streams.csv");
  std::int64_t ooms = 0;
  std::int64_t retries = 0;
  std::size_t first_oom = ReplayMoment::kNever;
  std::vector<bool> fits(kStreams + 1);
  std::size_t used = 0;    // segments holding a live block
  std::size_t cached = 0;  // whole cached segments
  std::size_t op = 0;
  for (std::size_t stream = 1; stream <= kStreams; ++stream, ++op) {
    fits[stream] = used + cached < kCapacity / kSegment;
    if (!fits[stream]) {
      ++retries;
      cached = 0;
      fits[stream] = used < kCapacity / kSegment;
    }
    if (fits[stream]) ++used;
    if (!fits[stream] && ooms++ == 0) first_oom = op;
    if (stream % kFreeEvery == 0) {
      ++op;
      if (fits[stream / 2]) {
        --used;
        ++cached;
      }
    }
  }
  ASSERT_GT(ooms, 1000);          // the case of the issue: most streams are refused...
  ASSERT_GT(retries - ooms, 10);  // ...and some refusals are saved by a free
  for (const char* config : {"", "expandable_segments:True"}) {
    SCOPED_TRACE(config);
    ReplayOptions options;
    options.capacity = kCapacity;
    options.config = AllocatorConfig::parse(config);
    const ReplayResult r = replay_trace(s, 0, options);
    EXPECT_EQ(r.num_ooms, ooms);
    EXPECT_EQ(r.first_oom.op, first_oom);
    EXPECT_EQ(r.peak_reserved, static_cast<std::int64_t>(kCapacity));
    EXPECT_EQ(r.final_stats.reserved_bytes[0].current,
              static_cast<std::int64_t>((used + cached) * kSegment));
    EXPECT_EQ(r.peak_live.live_bytes, r.peak_requested);
    // Expandable segments move a freed page to the refused stream instead of releasing it.
    if (*config == '\0') {
      EXPECT_EQ(r.num_alloc_retries, retries);
    }
  }
}

std::string log_error(const std::string& text) {
  return testing::format_error([&] { (void)read_rmm_log(text, "bad.csv"); });
}

#define EXPECT_LOG_ERROR(text, part) \
  EXPECT_NE(log_error(text).find(part), std::string::npos) << log_error(text)

TEST(RmmLog, BadInputNamesLineColumnAndExpectation) {
  const std::string h = kHeader;
  EXPECT_LOG_ERROR("", "bad.csv: empty; an RMM log starts with the header");
  EXPECT_LOG_ERROR("\n\r\n", "bad.csv: empty");
  EXPECT_LOG_ERROR("1,10:00:00.0,allocate,0x10,16,0\n",
                   "bad.csv: line 1: expected the header Thread,Time,Action,Pointer,Size,Stream "
                   "of an RMM log (rmm::mr::logging_resource_adaptor), found '1,10:00:00.0,");
  EXPECT_LOG_ERROR(h + "1,10:00:00.0,allocate,0x10,16,0\n1,10:00:00.0,free,0x10\n",
                   "bad.csv: line 3: expected 6 comma-separated fields");
  EXPECT_LOG_ERROR(h + "1,10:00:00.0,allocate,0xZZ,16,0\n",
                   "bad.csv: line 2: column 4 (Pointer): expected an address in hexadecimal "
                   "(0x7f00...), found '0xZZ'");
  EXPECT_LOG_ERROR(h + "1,10:00:00.0,allocate,0x10,-5,0\n",
                   "bad.csv: line 2: column 5 (Size): expected a decimal byte count, found '-5'");
  EXPECT_LOG_ERROR(h + "1,10:00:00.0,allocate,0x10,99999999999999999999,0\n",
                   "line 2: column 5 (Size): beyond 64 bits: '99999999999999999999'");
  EXPECT_LOG_ERROR(h + "1,10:00:00.0,allocate,0x10,16,0x1ffffffffffffffff\n",
                   "line 2: column 6 (Stream): beyond 64 bits");
  EXPECT_LOG_ERROR(h + "1,10:00:00.0,allocate,0x10,16,stream7\n",
                   "line 2: column 6 (Stream): expected a stream in hexadecimal");
  EXPECT_LOG_ERROR(h + "1,10:00:00.0,realloc,0x10,16,0\n",
                   "bad.csv: line 2: column 3 (Action): expected allocate, free or allocate "
                   "failure, found 'realloc'");
  EXPECT_LOG_ERROR(h + "1,10:00:00.0,\"allocate,0x10,16,0\n",
                   "bad.csv: line 2: a quoted field has no closing '\"'");
  EXPECT_LOG_ERROR(h + "1,10:00:00.0,\"allocate\"x,0x10,16,0\n",
                   "bad.csv: line 2: text after the closing quote of field 3");
  EXPECT_LOG_ERROR(h + "1,10:00:00.0,alloc\x01,0x10,16,0\n", "found 'alloc\\x1'");
}

}  // namespace
}  // namespace memscope
