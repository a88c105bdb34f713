// The corpus's small train-step snapshot: every reference number of its README, PyTorch's
// own placement rules reproducing the README's replay, and memscope's replay ending exactly as
// the snapshot. Without the corpus (MEMSCOPE_TRACES) every test here is skipped with the reason;
// a file that is there but unreadable is a failure.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "allocator_invariants.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/trace.hpp"
#include "torch_rules.hpp"
#include "trace_corpus.hpp"

namespace memscope {
namespace {

class RealTrace : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto path = corpus::find_trace(corpus::kSmallTrainStep);
    if (!path) return;
    found_ = true;
    try {
      snapshot_ = read_torch_snapshot_file(*path);
      plan_ = build_replay_plan(*snapshot_);
    } catch (const std::exception& e) {
      snapshot_.reset();
      error_ = e.what();
    }
  }
  void SetUp() override {
    if (!found_) GTEST_SKIP() << corpus::missing_reason(corpus::kSmallTrainStep);
    ASSERT_TRUE(plan_) << "the corpus's small train step could not be read: " << error_;
  }
  static const ReplayPlan& plan() { return *plan_; }

  static inline std::optional<TorchSnapshot> snapshot_;
  static inline std::optional<ReplayPlan> plan_;
  static inline std::string error_;
  static inline bool found_ = false;
};

TEST_F(RealTrace, ReproducesEveryReferenceNumber) {
  const ReplayPlan& p = plan();
  EXPECT_EQ(p.ops.size(), 3671U);
  EXPECT_EQ(p.starting_blocks(), 229U);
  EXPECT_EQ(p.starting_frees, 2U);
  EXPECT_EQ(p.starting_active, 227U);
  EXPECT_EQ(p.traced_ops, 3442U);
  EXPECT_EQ(p.live_before, 1'373'919'236U);
  EXPECT_EQ(p.peak_live, 13'923'997'700U);
  EXPECT_EQ(p.live_at_end, 1'373'919'236U);
  EXPECT_EQ(p.active_at_dump, 1'373'919'236U);
  EXPECT_TRUE(p.ends_as_snapshot());
  EXPECT_EQ(p.reserved_at_dump, 14'180'941'824U);
  EXPECT_EQ(p.segments_at_dump, 216U);
  EXPECT_EQ(p.large_segments_at_dump, 208U);
  EXPECT_EQ(p.small_segments_at_dump, 8U);
  EXPECT_EQ(p.distinct_sizes, 17U);
  const double ratio = static_cast<double>(p.reserved_at_dump) / static_cast<double>(p.peak_live);
  EXPECT_EQ(std::round(ratio * 10000), 10185);  // 1.0185
  ASSERT_EQ(snapshot_->device_traces.size(), 1U);
  EXPECT_EQ(snapshot_->device_traces[0].size(), 5163U);  // 1,721 each of alloc and both frees
}

TEST_F(RealTrace, PyTorchRulesFromAnEmptyCacheGiveTheReadmePeak) {
  const bench::TorchRulesResult torch =
      bench::replay_torch_rules(plan(), bench::TieBreak::lowest_address);
  EXPECT_EQ(torch.peak_reserved, 14'088'667'136U);
  EXPECT_EQ(torch.peak_requested, plan().peak_live);
  const double ratio =
      static_cast<double>(torch.peak_reserved) / static_cast<double>(plan().peak_live);
  EXPECT_EQ(std::round(ratio * 10000), 10118);  // 1.0118
}

TEST_F(RealTrace, MemscopeReplayEndsAsTheSnapshot) {
  CachingAllocator allocator(std::make_shared<SimulatedBackend>(80 * GiB), AllocatorConfig{});
  const ReplayResult r = replay(plan(), allocator);
  constexpr auto kAll = static_cast<std::size_t>(StatPool::all);
  EXPECT_EQ(r.num_ooms, 0);
  EXPECT_EQ(r.final_stats.requested_bytes[kAll].current,
            static_cast<std::int64_t>(plan().active_at_dump));
  EXPECT_EQ(r.peak_requested, static_cast<std::int64_t>(plan().peak_live));
  EXPECT_EQ(r.final_stats.allocation[kAll].current, 229);
  EXPECT_EQ(r.live_pointers.size(), 229U);
  EXPECT_EQ(r.num_device_free, 0);  // nothing forces a release with 80 GiB
  EXPECT_EQ(r.num_device_alloc, r.final_stats.segment[kAll].current);
  EXPECT_GE(r.peak_reserved, r.peak_allocated);
  EXPECT_GE(r.peak_allocated, r.peak_requested);
  EXPECT_TRUE(testing::allocator_consistent(allocator));
}

TEST_F(RealTrace, MemscopeDefaultsEqualTheModelWithItsOwnTieRule) {
  // memscope's size rules are PyTorch's; only equal-size ties differ (most recent first). The
  // model with that one rule swapped must therefore land on the same peak, segment for segment.
  ReplayOptions options;
  options.record_series = true;
  const ReplayResult ours = replay(plan(), options);
  const bench::TorchRulesResult model =
      bench::replay_torch_rules(plan(), bench::TieBreak::most_recent);
  EXPECT_EQ(static_cast<std::size_t>(ours.peak_reserved), model.peak_reserved);
  EXPECT_EQ(static_cast<std::size_t>(ours.num_device_alloc), model.segments);
  EXPECT_EQ(static_cast<std::size_t>(ours.peak_allocated), model.peak_allocated);
  // Step by step: two independent implementations of the same rules agree after every op.
  ASSERT_EQ(ours.series.size(), model.reserved_series.size());
  std::size_t differing = 0;
  for (std::size_t i = 0; i < ours.series.size(); ++i) {
    if (static_cast<std::size_t>(ours.series[i].reserved_bytes) != model.reserved_series[i]) {
      ++differing;
    }
  }
  EXPECT_EQ(differing, 0U);
}

TEST_F(RealTrace, EverySettingKeepsTheStatisticsConsistent) {
  const char* const settings[] = {"max_split_size:200MiB", "roundup_power2_divisions:4",
                                  "garbage_collection_threshold:0.8,memory_limit:16GiB",
                                  "memory_limit:14GiB"};
  for (const char* text : settings) {
    SCOPED_TRACE(text);
    CachingAllocator allocator(std::make_shared<SimulatedBackend>(80 * GiB),
                               AllocatorConfig::parse(text));
    const ReplayResult r = replay(plan(), allocator);
    EXPECT_EQ(r.num_ooms, 0);
    EXPECT_EQ(r.final_stats.requested_bytes[0].current,
              static_cast<std::int64_t>(plan().active_at_dump));
    EXPECT_GE(r.peak_reserved, r.peak_requested);
    EXPECT_TRUE(testing::allocator_consistent(allocator));
  }
}

}  // namespace
}  // namespace memscope
