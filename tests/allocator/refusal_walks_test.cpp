// Refusals at the limit walk the streams only when a free may have made something to release
// (issue 44, item 10): each refused allocation released the cache first, a walk over every
// stream's pools even when nothing was freed since the last one, so a replay of many streams
// past the device's capacity was quadratic (60,000 streams: 35 s). The speed goal is in
// bench/oom_replay.cpp; this checks the walks are skipped, and that what a walk would release
// is still released. With expandable segments the release still walks (a failed growth leaves
// ranges and pages behind); the front caches' walk is skipped there too. Costs well under a
// second.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "allocator/allocator_core.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

class RefusalWalks : public ::testing::TestWithParam<const char*> {};

TEST_P(RefusalWalks, RefusalsWalkTheStreamsOnlyAfterAFree) {
  auto device = std::make_shared<SimulatedBackend>(64 * MiB);
  AllocatorCore core(*device, AllocatorConfig::parse(GetParam()));
  // Each stream's 4 KiB takes a 2 MiB segment (or page) of its own: 32 streams fill the device.
  std::vector<void*> held;
  StreamId stream = 1;
  for (; stream <= 32; ++stream) {
    held.push_back(core.allocate(4096, stream));
    ASSERT_NE(held.back(), nullptr) << "stream " << stream;
  }
  ASSERT_EQ(core.allocate(4096, stream++), nullptr);  // the first refusal walks
  const bool fixed = std::string(GetParam()).empty();
  const std::uint64_t walks = core.stream_walks();
  const std::size_t pools = core.block_store().stream_count();
  for (int i = 0; i < 500; ++i) ASSERT_EQ(core.allocate(4096, stream++), nullptr);
  // Nothing was freed: no refusal walked (each walked twice before), no pools were left behind.
  EXPECT_EQ(core.stream_walks() - walks, fixed ? 0U : 500U);
  EXPECT_LE(core.block_store().stream_count(), pools + (fixed ? 0 : 1));
  EXPECT_EQ(core.stats().num_ooms, 501);
  EXPECT_EQ(core.stats().num_alloc_retries, 501);
  EXPECT_NO_THROW(core.validate());

  // A free leaves a whole segment (page) to release: the next refusal walks and succeeds on it.
  ASSERT_TRUE(core.deallocate(held[4]));
  void* again = core.allocate(4096, stream++);
  ASSERT_NE(again, nullptr);
  EXPECT_GT(core.stream_walks(), walks);
  EXPECT_EQ(core.stats().reserved_bytes[0].current, 64 * static_cast<std::int64_t>(MiB));
  EXPECT_EQ(core.allocate(4096, stream++), nullptr);  // full again
  EXPECT_NO_THROW(core.validate());

  // empty_cache() after refusals only: nothing to give back, and the streams still work.
  EXPECT_EQ(core.empty_cache(), 0U);
  ASSERT_TRUE(core.deallocate(again));
  EXPECT_EQ(core.empty_cache(), 2 * MiB);
  void* last = core.allocate(4096, stream);
  EXPECT_NE(last, nullptr);
  EXPECT_NO_THROW(core.validate());
}

INSTANTIATE_TEST_SUITE_P(Settings, RefusalWalks, ::testing::Values("", "expandable_segments:True"),
                         [](const auto& info) {
                           return std::string(info.index == 0 ? "Fixed" : "Expandable");
                         });

}  // namespace
}  // namespace memscope
