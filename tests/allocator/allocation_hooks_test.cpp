// AllocationHooks through its own interface: the hook bits follow the peak windows and the
// recording, an allocation is observed by the innermost window and recorded, and a free or a
// completion says when the bits were derived again (the core's gate must follow then).
// Cost: under 0.1 s.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>

#include "allocator/allocation_hooks.hpp"
#include "allocator/allocator_statistics.hpp"
#include "allocator/block.hpp"
#include "allocator/hot_path_gate.hpp"
#include "memscope/errors.hpp"
#include "memscope/peak_scope.hpp"
#include "memscope/recording.hpp"
#include "memscope/stats.hpp"
#include "memscope/trace_events.hpp"

namespace memscope::detail {
namespace {

constexpr std::size_t kNoSplitLimit = ~std::size_t{0};

class AllocationHooksTest : public ::testing::Test {
 protected:
  AllocationHooksTest() {
    segment_.stream = 3;
    segment_.stat_pool = static_cast<std::uint8_t>(StatPool::small);
    block_.address = 0x200000;
    block_.size = 4096;
    block_.segment = &segment_;
  }

  AllocatorStatistics statistics_{kNoSplitLimit};
  AllocationHooks hooks_{statistics_};
  Segment segment_;
  Block block_;
};

TEST_F(AllocationHooksTest, AWindowSetsItsBitAndSeesEachAllocationUntilClosed) {
  EXPECT_EQ(hooks_.bits(), 0U);
  PeakScope::Windows::Window window;
  hooks_.open_window(window);
  EXPECT_EQ(hooks_.bits(), unsigned{HotPathGate::kHookWindows});
  EXPECT_FALSE(hooks_.recording_events());
  statistics_.count_allocation(block_.stat_pool(), block_.size, 4000);
  hooks_.after_allocate(block_, 4000);
  statistics_.uncount_allocation(block_.stat_pool(), block_.size);
  EXPECT_EQ(window.record[0], 4096);  // allocated bytes at their highest inside the window
  EXPECT_EQ(window.record[3], 4000);  // requested bytes
  hooks_.close_window(window);
  EXPECT_EQ(hooks_.bits(), 0U);
}

TEST_F(AllocationHooksTest, RecordingSetsItsBitAndRecordsEventsWhileItWantsThem) {
  hooks_.event(TraceAction::empty_cache, 0, 1, 0, 0);  // nothing to record into: ignored
  EXPECT_EQ(hooks_.recorder(), nullptr);
  hooks_.start_recording(RecordingOptions{});
  EXPECT_TRUE(hooks_.recording_events());
  EXPECT_EQ(hooks_.bits(), unsigned{HotPathGate::kHookRecord});
  hooks_.event(TraceAction::segment_alloc, segment_.base, 2 << 20, 2 << 20, 3);
  hooks_.after_allocate(block_, 4000);
  block_.requested_size = 4000;
  EXPECT_FALSE(hooks_.record_free(block_));  // still recording: the bits stay
  ASSERT_NE(hooks_.recorder(), nullptr);
  EXPECT_EQ(hooks_.recorder()->size(), 4U);  // segment, alloc, free requested and completed
  hooks_.stop_recording();
  EXPECT_EQ(hooks_.bits(), 0U);              // no stacks to forget
  EXPECT_EQ(hooks_.recorder()->size(), 4U);  // the log is kept
}

TEST_F(AllocationHooksTest, AFreeAfterStopThatForgetsTheLastStackClearsTheBit) {
  hooks_.start_recording({.cpp_stacks = true});
  hooks_.after_allocate(block_, 4000);
  hooks_.stop_recording();
  EXPECT_TRUE(hooks_.recording_events());  // the block's stack is still to forget
  block_.requested_size = 4000;
  EXPECT_TRUE(hooks_.record_free(block_));  // forgotten: the core's gate follows
  EXPECT_EQ(hooks_.bits(), 0U);
}

TEST_F(AllocationHooksTest, NoRoomForAnyEntryIsAUsageErrorAndSetsNoBit) {
  RecordingOptions options;
  options.max_entries = 0;
  EXPECT_THROW(hooks_.start_recording(options), UsageError);
  EXPECT_EQ(hooks_.bits(), 0U);
}

}  // namespace
}  // namespace memscope::detail
