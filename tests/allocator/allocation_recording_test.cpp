// AllocationRecording through its own interface: started afresh, the events of a block's life
// (allocated, freed at once or after its streams, a segment's event) into its Recorder, whether
// the core must still report frees, and the log kept after stop. Cost: under 0.1 s.
#include <gtest/gtest.h>

#include "allocator/allocation_recording.hpp"
#include "allocator/block.hpp"
#include "memscope/errors.hpp"
#include "memscope/recording.hpp"
#include "memscope/trace_events.hpp"

namespace memscope::detail {
namespace {

TEST(AllocationRecording, ABlocksLifeGoesIntoTheRecorderUntilStopped) {
  AllocationRecording recording;
  EXPECT_EQ(recording.recorder(), nullptr);
  EXPECT_FALSE(recording.wants_frees());
  recording.start(RecordingOptions{});
  EXPECT_TRUE(recording.wants_frees());
  Segment segment;
  segment.stream = 3;
  Block block;
  block.address = 0x200000;
  block.size = 4096;
  block.segment = &segment;
  recording.event(TraceAction::segment_alloc, segment.base, 2 << 20, 2 << 20, 3);
  recording.allocated(block, 4000, 0);
  block.requested_size = 4000;
  EXPECT_TRUE(recording.freed(block));  // no stream uses: free_requested and free_completed
  ASSERT_NE(recording.recorder(), nullptr);
  EXPECT_EQ(recording.recorder()->size(), 4U);
  block.stream_uses.push_back(5);
  EXPECT_TRUE(recording.freed(block));  // it waits for stream 5: free_requested alone
  EXPECT_TRUE(recording.completed(block));
  EXPECT_EQ(recording.recorder()->size(), 6U);
  recording.stop();
  EXPECT_FALSE(recording.wants_frees());  // no stacks to forget
  EXPECT_FALSE(recording.freed(block));
  EXPECT_EQ(recording.recorder()->size(), 6U);  // kept, and nothing more recorded
  recording.start(RecordingOptions{});          // afresh: the earlier log goes
  EXPECT_EQ(recording.recorder()->size(), 0U);
}

TEST(AllocationRecording, NoRoomForAnyEntryIsAUsageError) {
  AllocationRecording recording;
  RecordingOptions options;
  options.max_entries = 0;
  EXPECT_THROW(recording.start(options), UsageError);
  EXPECT_EQ(recording.recorder(), nullptr);
}

}  // namespace
}  // namespace memscope::detail
