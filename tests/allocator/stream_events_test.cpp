// StreamEvents through its own interface, on the simulated backend's streams (hold() keeps a
// stream's events pending until complete()): record_stream's uses, one event per other stream
// at the free, blocks handed back once their last event is done, synchronize() waiting for
// held streams, and the "pending" checker. Cost: under 0.1 s.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "allocator/block.hpp"
#include "allocator/stream_events.hpp"
#include "memscope/errors.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/units.hpp"

namespace memscope::detail {
namespace {

class StreamEventsTest : public ::testing::Test {
 protected:
  StreamEventsTest() {
    segment_.stream = 1;
    for (Block& b : blocks_) {
      b.segment = &segment_;
      b.size = 512;
      b.use.allocated = true;
    }
  }
  // The free as the core makes it: no longer allocated, then its events recorded.
  void free(Block& b) {
    b.use.allocated = false;
    events_.record_frees(b);
  }

  SimulatedBackend device_{1 * GiB};
  StreamEvents events_{device_};
  Segment segment_;
  Block blocks_[2];
  std::vector<Block*> done_;
};

TEST_F(StreamEventsTest, UsesOfOtherStreamsOnlyOnceEach) {
  Block& b = blocks_[0];
  StreamEvents::add_use(b, 1);  // its own stream: nothing to wait for
  EXPECT_TRUE(b.freeable_at_once());
  StreamEvents::add_use(b, 2);
  StreamEvents::add_use(b, 2);
  StreamEvents::add_use(b, 3);
  EXPECT_EQ(b.stream_uses.size(), 2U);
  EXPECT_TRUE(b.other_streams());
  free(b);
  EXPECT_EQ(b.pending_events, 2U);
  EXPECT_TRUE(b.stream_uses.empty());
  EXPECT_FALSE(b.other_streams());
  EXPECT_TRUE(events_.any_pending());
}

TEST_F(StreamEventsTest, ABlockComesBackAfterItsLastEvent) {
  device_.hold(2);
  device_.hold(3);
  StreamEvents::add_use(blocks_[0], 2);
  StreamEvents::add_use(blocks_[0], 3);
  StreamEvents::add_use(blocks_[1], 3);
  free(blocks_[0]);
  free(blocks_[1]);
  const auto collect = [this](Block* b) { done_.push_back(b); };
  events_.process(collect);
  EXPECT_TRUE(done_.empty());
  device_.complete(3);
  events_.process(collect);
  ASSERT_EQ(done_, std::vector<Block*>{&blocks_[1]});  // blocks_[0] waits for stream 2 too
  EXPECT_EQ(blocks_[0].pending_events, 1U);
  device_.complete(2);
  events_.process(collect);
  EXPECT_EQ(done_, (std::vector<Block*>{&blocks_[1], &blocks_[0]}));
  EXPECT_FALSE(events_.any_pending());
}

TEST_F(StreamEventsTest, SynchronizeWaitsForHeldStreams) {
  device_.hold(2);
  StreamEvents::add_use(blocks_[0], 2);
  free(blocks_[0]);
  events_.synchronize([this](Block* b) { done_.push_back(b); });
  EXPECT_EQ(done_, std::vector<Block*>{&blocks_[0]});
  EXPECT_FALSE(events_.any_pending());
  EXPECT_EQ(device_.pending_events(), 0U);
  // The next free records an event again (on the spare one).
  blocks_[1].use.allocated = true;
  StreamEvents::add_use(blocks_[1], 2);
  free(blocks_[1]);
  EXPECT_EQ(blocks_[1].pending_events, 1U);
  events_.synchronize([](Block*) {});
  events_.destroy_spares();
}

TEST_F(StreamEventsTest, TheCheckerNamesAnEventForABlockThatIsNotPending) {
  device_.hold(2);
  StreamEvents::add_use(blocks_[0], 2);
  free(blocks_[0]);
  const std::vector<const Block*> all{&blocks_[0]};
  EXPECT_NO_THROW(events_.check(all));
  try {
    events_.check({});  // its block is not among the live ones
    ADD_FAILURE() << "an event for no live block passed";
  } catch (const InternalError& e) {
    EXPECT_EQ(e.invariant(), "pending");
  }
  events_.synchronize([](Block*) {});
  events_.destroy_spares();
}

}  // namespace
}  // namespace memscope::detail
