// CachingAllocator's recording (start_recording / recorded_snapshot): the events of scripted
// sequences with their fields, the ring, a randomized sequence whose events rebuild the live
// set and the segments, stacks, tags from the tracker, configuration, and threads.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "allocator_invariants.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/errors.hpp"
#include "memscope/memory_source.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/trace_tag.hpp"
#include "memscope/tracker.hpp"
#include "memscope/units.hpp"

namespace memscope {

// External linkage and never inlined: the recorded stack must show this function by name (the
// test binary exports its symbols; dladdr() sees no others).
[[gnu::noinline]] void* allocate_from_a_named_function(CachingAllocator& allocator);
[[gnu::noinline]] void* allocate_from_a_named_function(CachingAllocator& allocator) {
  void* p = allocator.allocate(12345);
  asm volatile("" : : "r"(p) : "memory");  // not a tail call
  return p;
}

namespace {

using A = TraceAction;

std::uint64_t addr(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}

const std::vector<TraceEvent>& events_of(const TorchSnapshot& s) {
  static const std::vector<TraceEvent> none;
  return s.device_traces.empty() ? none : s.device_traces[0];
}

std::vector<TraceAction> actions(const std::vector<TraceEvent>& events) {
  std::vector<TraceAction> out;
  out.reserve(events.size());
  for (const TraceEvent& e : events) out.push_back(e.action);
  return out;
}

// The part of an event a scripted test states.
struct Expected {
  TraceAction action;
  std::uint64_t addr;
  std::uint64_t size;
  std::uint64_t rounded;
  StreamId stream;
};

void expect_events(const std::vector<TraceEvent>& got, const std::vector<Expected>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE("event " + std::to_string(i) + " (" + to_string(want[i].action) + ")");
    EXPECT_EQ(got[i].action, want[i].action);
    EXPECT_EQ(got[i].addr, want[i].addr);
    EXPECT_EQ(got[i].size, want[i].size);
    EXPECT_EQ(got[i].rounded_size, want[i].rounded);
    EXPECT_EQ(got[i].stream, want[i].stream);
  }
}

TEST(Recording, ScriptedSequenceWithDeferredFreeAndEmptyCache) {
  auto device = std::make_shared<SimulatedBackend>(64 * GiB);
  CachingAllocator allocator(device, AllocatorConfig{});
  EXPECT_FALSE(allocator.recording());
  allocator.start_recording();
  EXPECT_TRUE(allocator.recording());
  const std::int64_t before = std::chrono::duration_cast<std::chrono::microseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();

  void* a = allocator.allocate(1000);  // new 2 MiB small segment
  const std::uint64_t small_segment = addr(a);
  device->hold(7);
  allocator.record_stream(a, 7);
  allocator.deallocate(a);                              // waits for stream 7: no free_completed yet
  void* b = allocator.allocate(3 * MiB, /*stream=*/0);  // new 20 MiB large segment
  device->complete(7);
  void* c = allocator.allocate(1000);  // processes the event first, then reuses a's block
  EXPECT_EQ(c, a);
  allocator.deallocate(c);
  allocator.deallocate(b);
  const std::size_t released = allocator.empty_cache();
  EXPECT_EQ(released, 22 * MiB);

  const TorchSnapshot snap = allocator.recorded_snapshot();
  const auto& events = events_of(snap);
  ASSERT_EQ(events.size(), 14U);
  // The two segment_free events come in the order of the allocator's stream table: compare
  // them as a set, the rest in order.
  std::vector<TraceEvent> ordered(events.begin(), events.begin() + 11);
  ordered.push_back(events[13]);
  expect_events(ordered, {
                             {A::segment_alloc, small_segment, 2 * MiB, 2 * MiB, 0},
                             {A::alloc, addr(a), 1000, 1024, 0},
                             {A::free_requested, addr(a), 1000, 1024, 0},
                             {A::segment_alloc, addr(b), 20 * MiB, 20 * MiB, 0},
                             {A::alloc, addr(b), 3 * MiB, 3 * MiB, 0},
                             {A::free_completed, addr(a), 1000, 1024, 0},
                             {A::alloc, addr(c), 1000, 1024, 0},
                             {A::free_requested, addr(c), 1000, 1024, 0},
                             {A::free_completed, addr(c), 1000, 1024, 0},
                             {A::free_requested, addr(b), 3 * MiB, 3 * MiB, 0},
                             {A::free_completed, addr(b), 3 * MiB, 3 * MiB, 0},
                             {A::empty_cache, 0, 22 * MiB, 0, 0},
                         });
  std::set<std::pair<std::uint64_t, std::uint64_t>> freed;
  for (std::size_t i : {11U, 12U}) {
    EXPECT_EQ(events[i].action, A::segment_free);
    freed.emplace(events[i].addr, events[i].size);
  }
  EXPECT_EQ(freed, (std::set<std::pair<std::uint64_t, std::uint64_t>>{{small_segment, 2 * MiB},
                                                                      {addr(b), 20 * MiB}}));
  // Times: microseconds of the system clock (interpolated from the CPU's counter, so within a
  // millisecond here), in order.
  EXPECT_GE(events.front().time_us, before - 1000);
  EXPECT_LE(events.back().time_us, std::chrono::duration_cast<std::chrono::microseconds>(
                                       std::chrono::system_clock::now().time_since_epoch())
                                           .count() +
                                       1000);
  for (std::size_t i = 1; i < events.size(); ++i)
    EXPECT_GE(events[i].time_us, events[i - 1].time_us);
  for (const TraceEvent& e : events) {
    EXPECT_EQ(e.stack, 0U);  // stacks were not asked for
    EXPECT_EQ(e.tag, 0U);
  }
  EXPECT_EQ(snap.dropped_events, 0U);
  EXPECT_EQ(snap.settings, allocator.config().to_string());
  EXPECT_TRUE(snap.segments.empty());  // empty_cache released both
}

TEST(Recording, StreamOfEventsIsTheStreamOfTheBlock) {
  auto device = std::make_shared<SimulatedBackend>(64 * GiB);
  CachingAllocator allocator(device, AllocatorConfig{});
  allocator.start_recording();
  void* p = allocator.allocate(4096, /*stream=*/5);
  allocator.deallocate(p);
  const auto events = events_of(allocator.recorded_snapshot());
  ASSERT_EQ(actions(events), (std::vector<TraceAction>{A::segment_alloc, A::alloc,
                                                       A::free_requested, A::free_completed}));
  for (const TraceEvent& e : events) EXPECT_EQ(e.stream, 5U);
}

TEST(Recording, OutOfMemoryAfterFlushAndRetry) {
  auto device = std::make_shared<SimulatedBackend>(64 * MiB);
  CachingAllocator allocator(device, AllocatorConfig{});
  allocator.start_recording();
  void* a = allocator.allocate(40 * MiB, /*stream=*/1);
  allocator.deallocate(a);                               // cached on stream 1, useless to stream 2
  void* b = allocator.allocate(30 * MiB, /*stream=*/2);  // flush: a's segment goes, then retry
  EXPECT_THROW((void)allocator.allocate(40 * MiB, /*stream=*/2), OutOfMemoryError);
  const auto events = events_of(allocator.recorded_snapshot());
  expect_events(events, {
                            {A::segment_alloc, addr(a), 40 * MiB, 40 * MiB, 1},
                            {A::alloc, addr(a), 40 * MiB, 40 * MiB, 1},
                            {A::free_requested, addr(a), 40 * MiB, 40 * MiB, 1},
                            {A::free_completed, addr(a), 40 * MiB, 40 * MiB, 1},
                            {A::segment_free, addr(a), 40 * MiB, 40 * MiB, 1},
                            {A::segment_alloc, addr(b), 30 * MiB, 30 * MiB, 2},
                            {A::alloc, addr(b), 30 * MiB, 30 * MiB, 2},
                            // addr is the device's free bytes: 64 - 30 MiB
                            {A::oom, 34 * MiB, 40 * MiB, 0, 2},
                        });
  allocator.deallocate(b);
}

TEST(Recording, RingKeepsTheNewestAndCountsTheDropped) {
  auto device = std::make_shared<SimulatedBackend>(64 * GiB);
  CachingAllocator allocator(device, AllocatorConfig{});
  allocator.start_recording({.max_entries = 10});
  std::vector<std::uint64_t> sizes;
  for (std::size_t i = 1; i <= 20; ++i) {
    void* p = allocator.allocate(i * 512);
    allocator.deallocate(p);
    sizes.push_back(i * 512);
  }
  // 1 segment_alloc + 20 x (alloc, free_requested, free_completed) = 61 events.
  const TorchSnapshot snap = allocator.recorded_snapshot();
  const auto& events = events_of(snap);
  ASSERT_EQ(events.size(), 10U);
  EXPECT_EQ(snap.dropped_events, 51U);
  // The newest ten, oldest first: pair 17's free_completed, then pairs 18 to 20 whole.
  EXPECT_EQ(events.back().action, A::free_completed);
  EXPECT_EQ(events.back().size, 20U * 512);
  EXPECT_EQ(events[0].action, A::free_completed);
  EXPECT_EQ(events[0].size, 17U * 512);
  EXPECT_EQ(events[1].action, A::alloc);
  EXPECT_EQ(events[1].size, 18U * 512);
  for (std::size_t i = 1; i < events.size(); ++i)
    EXPECT_GE(events[i].time_us, events[i - 1].time_us);
  // A new start begins afresh.
  allocator.start_recording({.max_entries = 10});
  EXPECT_TRUE(events_of(allocator.recorded_snapshot()).empty());
  EXPECT_EQ(allocator.recorded_snapshot().dropped_events, 0U);
}

TEST(Recording, OffRecordsNothingAndStopKeepsTheLog) {
  auto device = std::make_shared<SimulatedBackend>(64 * GiB);
  CachingAllocator allocator(device, AllocatorConfig{});
  void* p = allocator.allocate(4096);
  allocator.deallocate(p);
  (void)allocator.empty_cache();
  TorchSnapshot snap = allocator.recorded_snapshot();
  ASSERT_EQ(snap.device_traces.size(), 1U);
  EXPECT_TRUE(snap.device_traces[0].empty());
  EXPECT_EQ(snap.dropped_events, 0U);

  allocator.start_recording();
  p = allocator.allocate(4096);
  allocator.stop_recording();
  EXPECT_FALSE(allocator.recording());
  allocator.deallocate(p);
  (void)allocator.empty_cache();
  snap = allocator.recorded_snapshot();
  EXPECT_EQ(actions(events_of(snap)), (std::vector<TraceAction>{A::segment_alloc, A::alloc}));
  EXPECT_TRUE(testing::allocator_consistent(allocator));
}

// Regression: times were converted with a clock reading taken at each export, so two exports of
// the same stopped log differed by up to a microsecond.
TEST(Recording, ExportsOfAStoppedLogAreIdentical) {
  CachingAllocator allocator(std::make_shared<SimulatedBackend>(GiB), AllocatorConfig{});
  allocator.start_recording();
  for (std::size_t i = 0; i < 200; ++i) allocator.deallocate(allocator.allocate(4096 + 512 * i));
  allocator.stop_recording();
  const auto first = events_of(allocator.recorded_snapshot());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto second = events_of(allocator.recorded_snapshot());
  ASSERT_EQ(first.size(), second.size());
  ASSERT_FALSE(first.empty());
  for (std::size_t i = 0; i < first.size(); ++i)
    EXPECT_EQ(first[i].time_us, second[i].time_us) << i;
}

TEST(Recording, ZeroEntriesIsAUsageError) {
  CachingAllocator allocator(std::make_shared<SimulatedBackend>(GiB), AllocatorConfig{});
  EXPECT_THROW(allocator.start_recording({.max_entries = 0}), UsageError);
  EXPECT_FALSE(allocator.recording());
}

TEST(Recording, PeakScopesStillWorkWhileRecording) {
  // The hot path tests one word for both peak windows and recording.
  auto device = std::make_shared<SimulatedBackend>(64 * GiB);
  CachingAllocator allocator(device, AllocatorConfig{});
  allocator.start_recording();
  PeakScope scope = allocator.peak_scope();
  void* p = allocator.allocate(8 * MiB);
  allocator.deallocate(p);
  allocator.stop_recording();
  void* q = allocator.allocate(12 * MiB);
  allocator.deallocate(q);
  EXPECT_EQ(scope.peak().allocated_bytes, static_cast<std::int64_t>(12 * MiB));
  scope.close();
  void* r = allocator.allocate(16 * MiB);
  allocator.deallocate(r);
  EXPECT_EQ(events_of(allocator.recorded_snapshot()).size(), 4U);  // segment_alloc, alloc, frees
}

// Random allocations, frees (some waiting for held streams), stream completions and
// empty_cache(): replaying the recorded alloc / free_completed events must give exactly the
// active blocks of the snapshot, and the segment events exactly its segments.
TEST(Recording, RandomSequenceRebuildsLiveSetAndSegments) {
  auto device = std::make_shared<SimulatedBackend>(4 * GiB);
  CachingAllocator allocator(device, AllocatorConfig::parse("max_split_size:40MiB"));
  allocator.start_recording({.max_entries = 1000000});
  std::mt19937_64 rng(20261203);
  std::vector<void*> live;
  std::set<StreamId> held;
  const std::vector<std::size_t> sizes = {1,       500,     4096,     100000,
                                          1 * MiB, 3 * MiB, 12 * MiB, 50 * MiB};
  for (int step = 0; step < 20000; ++step) {
    const auto op = rng() % 100;
    if (op < 50 || live.empty()) {
      const std::size_t size = sizes[rng() % sizes.size()] + rng() % 512;
      const StreamId stream = rng() % 3;
      try {
        live.push_back(allocator.allocate(size, stream));
      } catch (const OutOfMemoryError&) {
      }
    } else if (op < 88) {
      const std::size_t i = rng() % live.size();
      if (rng() % 4 == 0) {
        const StreamId other = 10 + rng() % 2;
        if (rng() % 2 == 0 && held.insert(other).second) device->hold(other);
        allocator.record_stream(live[i], other);
      }
      allocator.deallocate(live[i]);
      live[i] = live.back();
      live.pop_back();
    } else if (op < 97) {
      if (!held.empty()) {
        const StreamId s = *held.begin();
        device->complete(s);
        held.erase(s);
      }
    } else {
      (void)allocator.empty_cache();
      held.clear();  // it synchronized every stream; later holds start afresh
    }
  }
  const TorchSnapshot snap = allocator.recorded_snapshot();
  EXPECT_EQ(snap.dropped_events, 0U);
  std::map<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>> blocks;  // addr -> sizes
  std::map<std::uint64_t, std::uint64_t> segments;
  std::size_t ooms = 0;
  for (const TraceEvent& e : events_of(snap)) {
    switch (e.action) {
      case A::alloc:
        ASSERT_TRUE(blocks.emplace(e.addr, std::pair{e.size, e.rounded_size}).second);
        break;
      case A::free_completed:
        ASSERT_EQ(blocks.erase(e.addr), 1U);
        break;
      case A::segment_alloc:
        ASSERT_TRUE(segments.emplace(e.addr, e.size).second);
        break;
      case A::segment_free:
        ASSERT_EQ(segments.erase(e.addr), 1U);
        break;
      case A::oom:
        ++ooms;
        break;
      default:
        break;
    }
  }
  std::map<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>> active;
  std::map<std::uint64_t, std::uint64_t> held_segments;
  for (const TorchSegment& s : snap.segments) {
    held_segments.emplace(s.info.address, s.info.total_size);
    for (const BlockInfo& b : s.info.blocks) {
      if (b.state != BlockState::inactive)
        active.emplace(b.address, std::pair{b.requested_size, b.size});
    }
  }
  EXPECT_EQ(blocks, active);
  EXPECT_EQ(segments, held_segments);
  EXPECT_EQ(static_cast<std::int64_t>(ooms), allocator.stats().num_ooms);
  EXPECT_GT(segments.size(), 0U);
  for (void* p : live) allocator.deallocate(p);
}

TEST(Recording, CppStacksNameTheCallingFunction) {
  auto device = std::make_shared<SimulatedBackend>(64 * GiB);
  CachingAllocator allocator(device, AllocatorConfig{});
  allocator.start_recording({.cpp_stacks = true});
  void* p = allocate_from_a_named_function(allocator);
  void* q = allocate_from_a_named_function(allocator);
  const TorchSnapshot snap = allocator.recorded_snapshot();
  std::vector<StackId> stacks;
  for (const TraceEvent& e : events_of(snap)) {
    if (e.action == A::alloc) stacks.push_back(e.stack);
  }
  ASSERT_EQ(stacks.size(), 2U);
  ASSERT_NE(stacks[0], 0U);
  const std::vector<TraceFrame> frames = snap.strings.stack_frames(stacks[0]);
  const bool named = std::any_of(frames.begin(), frames.end(), [](const TraceFrame& f) {
    return f.name.find("allocate_from_a_named_function") != std::string::npos;
  });
  std::string names;
  for (const TraceFrame& f : frames) names += "\n  " + f.name + " (" + f.filename + ")";
  EXPECT_TRUE(named) << "frames:" << names;
  // The recorder's own frames are left out: the stack starts in the allocator's allocate().
  for (const TraceFrame& f : frames) {
    EXPECT_EQ(f.name.find("Recorder"), std::string::npos) << names;
    EXPECT_EQ(f.name.find("after_allocate"), std::string::npos) << names;
    EXPECT_EQ(f.name.find("capture"), std::string::npos) << names;
  }
  // (Its first frame may be unnamed: the call sits in the cold part of AllocatorCore::allocate,
  // a local symbol dladdr() does not see; it is then named by its offset.)
  const std::string& first = frames.at(0).name;
  EXPECT_TRUE(first.find("allocate") != std::string::npos || first.starts_with("+0x")) << names;
  // The same call site twice: the same interned stack... except for the return address in
  // this test, so only the inner frames are shared; and the live blocks carry their stacks.
  std::size_t with_stack = 0;
  for (const TorchSegment& s : snap.segments) {
    ASSERT_EQ(s.block_stacks.size(), s.info.blocks.size());
    for (std::size_t i = 0; i < s.info.blocks.size(); ++i) {
      if (s.info.blocks[i].address == addr(p)) {
        EXPECT_EQ(s.block_stacks[i], stacks[0]);
        ++with_stack;
      }
      if (s.info.blocks[i].address == addr(q)) {
        EXPECT_EQ(s.block_stacks[i], stacks[1]);
        ++with_stack;
      }
    }
  }
  EXPECT_EQ(with_stack, 2U);
  allocator.deallocate(p);
  // A freed block's stack is forgotten: its address may be reused by an unrecorded allocation.
  allocator.stop_recording();
  void* r = allocator.allocate(12345);
  EXPECT_EQ(r, p);
  for (const TorchSegment& s : allocator.recorded_snapshot().segments) {
    for (std::size_t i = 0; i < s.info.blocks.size(); ++i) {
      if (s.info.blocks[i].address == addr(r)) {
        EXPECT_EQ(s.block_stacks[i], 0U);
      }
    }
  }
  allocator.deallocate(q);
  allocator.deallocate(r);
}

TEST(Recording, TagsFollowTheScopeAndNestedTrackerStages) {
  auto device = std::make_shared<SimulatedBackend>(64 * GiB);
  CachingAllocator allocator(device, AllocatorConfig{});
  allocator.start_recording();
  {
    MemoryTracker tracker({.sources = {make_allocator_source(allocator)}, .implicit_init = false});
    auto train = tracker.stage("train");
    allocator.deallocate(allocator.allocate(100));
    {
      auto eval = tracker.stage("eval");
      allocator.deallocate(allocator.allocate(200));
    }
    allocator.deallocate(allocator.allocate(300));
  }
  EXPECT_EQ(current_trace_tag(), nullptr);
  {
    const TraceTagScope scope("outer");
    {
      const TraceTagScope inner("inner");
      allocator.deallocate(allocator.allocate(400));
    }
    allocator.deallocate(allocator.allocate(500));
  }
  allocator.deallocate(allocator.allocate(600));
  const TorchSnapshot snap = allocator.recorded_snapshot();
  std::vector<std::pair<std::uint64_t, std::string>> tagged;
  for (const TraceEvent& e : events_of(snap)) {
    if (e.action == A::alloc) tagged.emplace_back(e.size, snap.strings.tags.at(e.tag));
  }
  EXPECT_EQ(tagged, (std::vector<std::pair<std::uint64_t, std::string>>{{100, "train"},
                                                                        {200, "eval"},
                                                                        {300, "train"},
                                                                        {400, "inner"},
                                                                        {500, "outer"},
                                                                        {600, ""}}));
  EXPECT_EQ(intern_trace_tag("train"), intern_trace_tag(std::string("tra") + "in"));
  EXPECT_EQ(intern_trace_tag(""), nullptr);
}

TEST(Recording, TrackerImplicitInitTagsUntilTheFirstStage) {
  auto device = std::make_shared<SimulatedBackend>(64 * GiB);
  CachingAllocator allocator(device, AllocatorConfig{});
  allocator.start_recording();
  {
    MemoryTracker tracker({.sources = {make_allocator_source(allocator)}});
    allocator.deallocate(allocator.allocate(100));
    tracker.start("train");
    allocator.deallocate(allocator.allocate(200));
    // the tracker ends with "train" still running: its tag goes with it
  }
  EXPECT_EQ(current_trace_tag(), nullptr);
  const TorchSnapshot snap = allocator.recorded_snapshot();
  std::vector<std::string> tags;
  for (const TraceEvent& e : events_of(snap)) {
    if (e.action == A::alloc) tags.push_back(snap.strings.tags.at(e.tag));
  }
  EXPECT_EQ(tags, (std::vector<std::string>{"init", "train"}));
}

// Regression: a child forked while another thread interned a tag found the tag table's mutex
// held forever, and its first stage (or TraceTagScope) hung.
TEST(Recording, TagsCanBeInternedInAChildForkedWhileAnotherThreadInterns) {
  std::atomic<bool> stop{false};
  std::thread interner([&stop] {
    for (std::uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
      (void)intern_trace_tag("tag" + std::to_string(i % 50));
    }
  });
  int hung = 0;
  for (int i = 0; i < 200; ++i) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::alarm(5);  // a deadlocked child dies of SIGALRM
      const TraceTagScope scope("child" + std::to_string(i % 7));
      ::_exit(current_trace_tag() != nullptr ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++hung;
  }
  stop = true;
  interner.join();
  EXPECT_EQ(hung, 0);
}

TEST(Recording, ConfigurationStartsRecording) {
  const AllocatorConfig config = AllocatorConfig::parse("record_history:5,record_stacks:cpp");
  EXPECT_EQ(config.record_history, 5U);
  EXPECT_TRUE(config.record_cpp_stacks);
  EXPECT_FALSE(config.record_python_stacks);
  EXPECT_EQ(AllocatorConfig::parse(config.to_string()), config);
  const AllocatorConfig all = AllocatorConfig::parse("record_stacks:all,record_history:7");
  EXPECT_TRUE(all.record_cpp_stacks && all.record_python_stacks);
  EXPECT_EQ(AllocatorConfig::parse(all.to_string()), all);
  EXPECT_EQ(AllocatorConfig::parse("record_history:0"), AllocatorConfig{});
  for (const char* bad :
       {"record_history:-1", "record_history:many", "record_history:1e3", "record_stacks:java",
        "record_stacks:python", "record_history:99999999999"}) {
    SCOPED_TRACE(bad);
    try {
      (void)AllocatorConfig::parse(bad);
      ADD_FAILURE() << "accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("record_"), std::string::npos) << e.what();
    }
  }

  CachingAllocator allocator(std::make_shared<SimulatedBackend>(64 * GiB), config);
  EXPECT_TRUE(allocator.recording());
  for (int i = 0; i < 3; ++i) allocator.deallocate(allocator.allocate(4096));
  const TorchSnapshot snap = allocator.recorded_snapshot();
  EXPECT_EQ(events_of(snap).size(), 5U);
  EXPECT_EQ(snap.dropped_events, 5U);  // of 1 segment_alloc + 3 x 3 events
  EXPECT_EQ(snap.settings, "record_history:5,record_stacks:cpp");
  EXPECT_NE(events_of(snap)[0].stack + events_of(snap)[1].stack + events_of(snap)[2].stack, 0U);
}

TEST(Recording, ThreadsRecordEveryEventWithTheirOwnTags) {
  auto device = std::make_shared<SimulatedBackend>(64 * GiB);
  CachingAllocator allocator(device, AllocatorConfig{});
  allocator.start_recording({.max_entries = 1000000, .cpp_stacks = true});
  constexpr int kThreads = 4;
  constexpr int kPairs = 2000;
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&allocator, t] {
      const TraceTagScope tag("thread" + std::to_string(t));
      std::vector<void*> mine;
      for (int i = 0; i < kPairs; ++i) {
        mine.push_back(
            allocator.allocate(512 * (1 + static_cast<std::size_t>(t)), static_cast<StreamId>(t)));
        if (mine.size() > 8) {
          allocator.deallocate(mine.front());
          mine.erase(mine.begin());
        }
      }
      for (void* p : mine) allocator.deallocate(p);
    });
  }
  std::thread reader([&allocator] {  // snapshots while others record
    for (int i = 0; i < 20; ++i) (void)allocator.recorded_snapshot();
  });
  for (auto& th : threads) th.join();
  reader.join();
  const TorchSnapshot snap = allocator.recorded_snapshot();
  std::map<std::string, int> allocs;
  std::map<std::string, int> completed;
  for (const TraceEvent& e : events_of(snap)) {
    const std::string& tag = snap.strings.tags.at(e.tag);
    if (e.action == A::alloc) {
      ++allocs[tag];
      EXPECT_EQ(tag, "thread" + std::to_string(e.stream));
      EXPECT_EQ(e.size, 512 * (1 + e.stream));
      EXPECT_NE(e.stack, 0U);
    }
    if (e.action == A::free_completed) ++completed[tag];
  }
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(allocs["thread" + std::to_string(t)], kPairs);
    EXPECT_EQ(completed["thread" + std::to_string(t)], kPairs);
  }
}

}  // namespace
}  // namespace memscope
