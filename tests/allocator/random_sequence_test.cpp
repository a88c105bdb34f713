// The strongest test the field has: a long seeded random sequence of allocations, frees,
// record_streams, empty_caches and peak and total resets over several streams and sizes from 1 B to
// 1 GiB, with every invariant checked after every step: the allocator's own
// (CachingAllocator::validate(): blocks tile their segments, the cache holds exactly the free
// blocks, statistics rebuilt from the blocks equal the live ones, current <= peak) and those of
// a model kept here (peaks monotone between resets; a block is only reused by its own stream
// and never while a stream recorded on it still has work pending; allocation counts and the
// device's reserved bytes agree with the statistics).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "allocator_invariants.hpp"
#include "expandable_checks.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

struct Live {
  std::size_t requested;
  StreamId stream;
  std::set<StreamId> recorded;
};

struct PendingRange {
  std::uintptr_t begin;
  std::uintptr_t end;
  std::set<StreamId> waiting_on;  // held streams recorded on the block when it was freed
};

bool peaks_monotone(const MemoryStats& before, const MemoryStats& after) {
  const StatArray MemoryStats::*families[] = {
      &MemoryStats::allocation,      &MemoryStats::segment,
      &MemoryStats::active,          &MemoryStats::inactive_split,
      &MemoryStats::allocated_bytes, &MemoryStats::reserved_bytes,
      &MemoryStats::active_bytes,    &MemoryStats::inactive_split_bytes,
      &MemoryStats::requested_bytes};
  for (const auto family : families) {
    for (std::size_t pool = 0; pool < kStatPools; ++pool) {
      if ((after.*family)[pool].peak < (before.*family)[pool].peak) {
        ADD_FAILURE() << "a peak fell from " << (before.*family)[pool].peak << " to "
                      << (after.*family)[pool].peak;
        return false;
      }
    }
  }
  return after.oversize_allocations.peak >= before.oversize_allocations.peak &&
         after.oversize_segments.peak >= before.oversize_segments.peak;
}

constexpr int kValidateEveryStepUntil = 5'000;
constexpr int kValidateEvery = 2;

class RandomSequence {
 public:
  RandomSequence(std::uint64_t seed, const AllocatorConfig& config)
      : rng_(seed),
        device_(std::make_shared<SimulatedBackend>(48 * GiB)),
        allocator_(device_, config) {}

  // Runs `steps` random operations; returns false (after a gtest failure) at the first problem.
  bool run(int steps) {
    steps_ = steps;
    for (step_ = 0; step_ < steps; ++step_) {
      const int op = std::uniform_int_distribution<int>(0, 999)(rng_);
      if (op < 470) {
        allocate();
      } else if (op < 900) {
        free_one();
      } else if (op < 960) {
        record_stream();
      } else if (op < 985) {
        toggle_hold();
      } else if (op < 993) {
        empty_cache();
      } else if (op < 997) {
        allocator_.reset_peak_stats();
        previous_ = allocator_.stats();
        remember_peaks(previous_);
      } else {
        carry_accumulated();
        allocator_.reset_accumulated_stats();
        remember_bases(allocator_.stats());
      }
      if (!check()) return false;
    }
    return true;
  }

  [[nodiscard]] const CachingAllocator& allocator() const { return allocator_; }
  // memory_stats() as if reset_accumulated_stats() had never run: what the sequence exercised.
  [[nodiscard]] std::map<std::string, std::int64_t> totals() const {
    std::map<std::string, std::int64_t> out = allocator_.memory_stats();
    for (const auto& [key, value] : carried_) out[key] += value;
    return out;
  }

 private:
  // The statistics of blocks in use, which rise only when a block is allocated (one step): each
  // one's peak is exactly the most it was after any step since the last reset_peak_stats().
  // active and active_bytes are derived (allocation + the blocks waiting on streams), and so is
  // every `freed` (from allocated, current, and current at the last reset): this checks both.
  static constexpr std::array<StatArray MemoryStats::*, 5> kInUse{
      &MemoryStats::allocation, &MemoryStats::active, &MemoryStats::allocated_bytes,
      &MemoryStats::active_bytes, &MemoryStats::requested_bytes};
  void remember_peaks(const MemoryStats& s) {
    for (std::size_t f = 0; f < kInUse.size(); ++f) {
      for (std::size_t pool = 0; pool < kStatPools; ++pool) {
        peaks_[f][pool] = (s.*kInUse[f])[pool].current;
      }
    }
  }
  // Every statistic's current at the last reset_accumulated_stats(), when allocated and freed
  // restart from 0: from then on allocated - freed == current - base.
  void remember_bases(const MemoryStats& s) {
    for (std::size_t f = 0; f < kStatFamilies.size(); ++f) {
      for (std::size_t pool = 0; pool < kStatPools; ++pool) {
        family_bases_[f][pool] = (s.*kStatFamilies[f].member)[pool].current;
      }
    }
    for (std::size_t f = 0; f < kSingleStats.size(); ++f) {
      single_bases_[f] = (s.*kSingleStats[f].member).current;
    }
  }
  void check_totals(const MemoryStats& now) {
    const auto check = [this](const Stat& stat, std::int64_t base, std::string_view name,
                              std::string_view pool) {
      EXPECT_EQ(stat.allocated - stat.freed, stat.current - base)
          << "step " << step_ << ": " << name << "." << pool
          << ": allocated - freed disagrees with current";
    };
    for (std::size_t f = 0; f < kStatFamilies.size(); ++f) {
      for (std::size_t pool = 0; pool < kStatPools; ++pool) {
        check((now.*kStatFamilies[f].member)[pool], family_bases_[f][pool], kStatFamilies[f].name,
              kStatPoolNames[pool]);
      }
    }
    for (std::size_t f = 0; f < kSingleStats.size(); ++f) {
      check(now.*kSingleStats[f].member, single_bases_[f], kSingleStats[f].name, "");
    }
  }
  static std::string_view family_name(std::size_t f) {
    for (const StatFamily& family : kStatFamilies) {
      if (family.member == kInUse[f]) return family.name;
    }
    return "?";
  }
  void check_in_use_peaks(const MemoryStats& now) {
    for (std::size_t f = 0; f < kInUse.size(); ++f) {
      for (std::size_t pool = 0; pool < kStatPools; ++pool) {
        const Stat& stat = (now.*kInUse[f])[pool];
        std::int64_t& peak = peaks_[f][pool];
        peak = std::max(peak, stat.current);
        EXPECT_EQ(stat.peak, peak) << "step " << step_ << ": " << family_name(f) << "."
                                   << kStatPoolNames[pool] << ": the peak is not exact";
      }
    }
  }
  std::array<std::array<std::int64_t, kStatPools>, kInUse.size()> peaks_{};
  std::array<std::array<std::int64_t, kStatPools>, kStatFamilies.size()> family_bases_{};
  std::array<std::int64_t, kSingleStats.size()> single_bases_{};
  void carry_accumulated() {
    for (const auto& [key, value] : allocator_.memory_stats()) {
      if (key.ends_with(".allocated") || key.ends_with(".freed") || key.starts_with("num_")) {
        carried_[key] += value;
      }
    }
  }
  std::map<std::string, std::int64_t> carried_;  // accumulated totals before resets

 public:
  // Pending blocks check_expandable() looked at (summed over steps).
  [[nodiscard]] long pending_checks() const { return pending_checks_; }

 private:
  std::size_t random_size() {
    // Log-uniform from 1 B to 1 GiB, with extra weight on the small sizes programs use most.
    const double exponent = std::uniform_real_distribution<double>(0.0, 30.0)(rng_);
    const double skew = std::pow(exponent / 30.0, 1.6) * 30.0;
    return std::max<std::size_t>(1, static_cast<std::size_t>(std::exp2(skew)));
  }

  StreamId random_stream() { return std::uniform_int_distribution<StreamId>(0, 2)(rng_); }

  void allocate() {
    if (live_.size() >= 96) return free_one();
    const std::size_t size = random_size();
    const StreamId stream = random_stream();
    void* p = nullptr;
    const std::int64_t syncs = allocator_.stats().num_sync_all_streams;
    try {
      p = allocator_.allocate(size, stream);
    } catch (const OutOfMemoryError&) {
      pending_.clear();  // the flush before giving up waited for every stream
      return;
    }
    // A miss that flushed the cache waited for every stream: pending blocks became free.
    if (allocator_.stats().num_sync_all_streams != syncs) pending_.clear();
    const auto address = reinterpret_cast<std::uintptr_t>(p);
    const auto found = allocator_.lookup(p);
    EXPECT_EQ(found.requested_size, size) << "step " << step_;
    // Its segment's stream: a block is never handed across streams.
    EXPECT_EQ(found.stream, stream) << "step " << step_;
    // Never inside a block that is waiting for a recorded stream.
    for (const PendingRange& r : pending_) {
      EXPECT_FALSE(address < r.end && address + found.size > r.begin)
          << "step " << step_ << ": reused a block while a recorded stream was still working";
    }
    live_.emplace(address, Live{size, stream, {}});
  }

  void free_one() {
    if (live_.empty()) return;
    auto it = live_.begin();
    std::advance(it, std::uniform_int_distribution<std::size_t>(0, live_.size() - 1)(rng_));
    const auto size = allocator_.lookup(reinterpret_cast<void*>(it->first)).size;
    std::set<StreamId> waiting;
    for (const StreamId s : it->second.recorded) {
      if (held_.contains(s)) waiting.insert(s);
    }
    if (!waiting.empty()) pending_.push_back({it->first, it->first + size, waiting});
    allocator_.deallocate(reinterpret_cast<void*>(it->first));
    live_.erase(it);
  }

  void record_stream() {
    if (live_.empty()) return;
    auto it = live_.begin();
    std::advance(it, std::uniform_int_distribution<std::size_t>(0, live_.size() - 1)(rng_));
    const StreamId s = random_stream();
    allocator_.record_stream(reinterpret_cast<void*>(it->first), s);
    if (s != it->second.stream) it->second.recorded.insert(s);
  }

  void toggle_hold() {
    const StreamId s = random_stream();
    if (held_.contains(s)) {
      device_->complete(s);
      held_.erase(s);
      for (PendingRange& r : pending_) r.waiting_on.erase(s);
      std::erase_if(pending_, [](const PendingRange& r) { return r.waiting_on.empty(); });
    } else {
      device_->hold(s);
      held_.insert(s);
    }
  }

  void empty_cache() {
    const MemoryStats before = allocator_.stats();
    const std::size_t released = allocator_.empty_cache();
    const MemoryStats after = allocator_.stats();
    EXPECT_EQ(after.num_sync_all_streams, before.num_sync_all_streams + 1) << "step " << step_;
    EXPECT_EQ(before.reserved_bytes[0].current - after.reserved_bytes[0].current,
              static_cast<std::int64_t>(released))
        << "step " << step_;
    pending_.clear();  // empty_cache waited for every stream
  }

  bool check() {
    const MemoryStats now = allocator_.stats();
    // validate() walks every block: after every one of the first steps, where most state
    // changes are new, then after every kValidateEvery-th and the last, to keep the test fast
    // under sanitizers.
    const bool validate_now =
        step_ < kValidateEveryStepUntil || step_ % kValidateEvery == 0 || step_ + 1 == steps_;
    const ::testing::AssertionResult valid =
        validate_now ? testing::validated(allocator_) : ::testing::AssertionSuccess();
    EXPECT_TRUE(valid) << "step " << step_;
    // Peaks never fall between resets.
    if (!peaks_monotone(previous_, now)) return false;
    check_in_use_peaks(now);
    check_totals(now);
    EXPECT_EQ(device_->reserved_bytes(), static_cast<std::size_t>(now.reserved_bytes[0].current));
    EXPECT_EQ(now.allocation[0].current, static_cast<std::int64_t>(live_.size()));
    if (allocator_.config().expandable_segments) check_expandable();
    previous_ = now;
    return valid && !::testing::Test::HasFailure();
  }

  // With expandable segments, also: the snapshot's totals equal the statistics, every segment is
  // one mapped range its blocks tile, and a block freed while a held stream still works on it
  // stays mapped, pending and where it was (recycling must not move or unmap its pages).
  void check_expandable() {
    EXPECT_TRUE(testing::expandable_consistent(allocator_)) << "step " << step_;
    // The device's own page count: every reserved byte is a mapped page, and no other.
    EXPECT_EQ(device_->mapped_bytes(),
              static_cast<std::size_t>(allocator_.stats().reserved_bytes[0].current))
        << "step " << step_;
    const Snapshot snap = allocator_.snapshot();
    for (const PendingRange& r : pending_) {
      const BlockInfo* b = testing::block_at(snap, r.begin);
      EXPECT_TRUE(b != nullptr && b->state == BlockState::active_pending_free &&
                  b->size == r.end - r.begin)
          << "step " << step_ << ": the block at " << r.begin
          << " freed while a held stream used it is no longer a pending block of its own";
      EXPECT_TRUE(testing::mapped(snap, r.begin, r.end - r.begin))
          << "step " << step_ << ": pages of a pending block were unmapped or moved";
      ++pending_checks_;
    }
  }

  std::mt19937_64 rng_;
  std::shared_ptr<SimulatedBackend> device_;
  CachingAllocator allocator_;
  std::map<std::uintptr_t, Live> live_;
  std::vector<PendingRange> pending_;
  std::set<StreamId> held_;
  MemoryStats previous_;
  int step_ = 0;
  int steps_ = 0;
  long pending_checks_ = 0;
};

TEST(RandomSequence, HundredThousandStepsDefaultConfig) {
  RandomSequence sequence(20261202, AllocatorConfig{});
  ASSERT_TRUE(sequence.run(100'000));
  EXPECT_TRUE(testing::snapshot_consistent(sequence.allocator().snapshot()));
  // The sequence must really exercise the machinery it claims to test.
  const auto s = sequence.totals();
  EXPECT_GT(s.at("num_device_alloc"), 100);
  EXPECT_GT(s.at("num_device_free"), 100);
  EXPECT_GT(s.at("inactive_split.all.allocated"), 1000);
  EXPECT_GT(s.at("allocation.small_pool.allocated"), 5000);
  EXPECT_GT(s.at("allocation.large_pool.allocated"), 5000);
}

TEST(RandomSequence, TwentyThousandStepsWithSplitLimitRoundingAndGc) {
  const AllocatorConfig config = AllocatorConfig::parse(
      "max_split_size:64MiB,roundup_power2_divisions:[64:1,>:4],garbage_collection_threshold:0.5,"
      "memory_limit:4GiB");
  RandomSequence sequence(7, config);
  ASSERT_TRUE(sequence.run(20'000));
  const auto s = sequence.totals();
  EXPECT_GT(s.at("oversize_allocations.allocated"), 100);
  EXPECT_GT(s.at("num_ooms"), 0);  // a 4 GiB limit with up to 96 blocks of up to 1 GiB
}

// Expandable segments under each page-recycling policy: the same sequence, and after every step
// the checks of check_expandable() on top of the usual ones.
class RandomSequenceExpandable : public ::testing::TestWithParam<const char*> {};

TEST_P(RandomSequenceExpandable, TwentyThousandStepsKeepSnapshotStatisticsAndPendingBlocksRight) {
  const AllocatorConfig config = AllocatorConfig::parse(
      std::string("expandable_segments:true,expandable_segments_recycling:") + GetParam());
  RandomSequence sequence(20261203, config);
  ASSERT_TRUE(sequence.run(20'000));
  const auto s = sequence.totals();
  EXPECT_GT(s.at("num_device_alloc"), 100);  // map calls
  EXPECT_GT(s.at("num_device_free"), 100);   // unmap calls
  EXPECT_GT(s.at("inactive_split.all.allocated"), 1000);
  EXPECT_GT(s.at("allocation.small_pool.allocated"), 1000);
  EXPECT_GT(s.at("allocation.large_pool.allocated"), 1000);
  EXPECT_GT(sequence.pending_checks(), 1000);  // blocks waiting on held streams were watched
}

TEST_P(RandomSequenceExpandable, TwentyThousandStepsWithSplitLimitAndATightMemoryLimit) {
  // A 4 GiB limit with up to 96 blocks of up to 1 GiB: the out-of-memory path (unmap every
  // free page, retry) runs often, and max_split_size keeps oversize blocks whole.
  const AllocatorConfig config = AllocatorConfig::parse(
      std::string("max_split_size:64MiB,memory_limit:4GiB,expandable_segments:true,"
                  "expandable_segments_recycling:") +
      GetParam());
  RandomSequence sequence(11, config);
  ASSERT_TRUE(sequence.run(20'000));
  const auto s = sequence.totals();
  EXPECT_GT(s.at("num_ooms"), 0);
  EXPECT_GT(s.at("num_alloc_retries"), 0);
  EXPECT_GT(s.at("oversize_allocations.allocated"), 100);
}

INSTANTIATE_TEST_SUITE_P(Recycling, RandomSequenceExpandable,
                         ::memscope::testing::kRecyclingPolicies, ::memscope::testing::policy_name);

}  // namespace
}  // namespace memscope
