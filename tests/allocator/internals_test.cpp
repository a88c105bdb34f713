// The allocator's building blocks against brute-force references: size rules, the best-fit
// bins and the pointer map.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <unordered_map>
#include <vector>

#include "allocator/free_bins.hpp"
#include "allocator/pointer_map.hpp"
#include "allocator/size_rules.hpp"
#include "memscope/units.hpp"

namespace memscope::detail {
namespace {

TEST(SizeRules, RoundingAndSegments) {
  const AllocatorConfig config;
  EXPECT_EQ(round_size(1, config), 512U);
  EXPECT_EQ(round_size(512, config), 512U);
  EXPECT_EQ(round_size(513, config), 1024U);
  EXPECT_EQ(round_size(1 * MiB + 1, config), 1 * MiB + 512);
  EXPECT_EQ(segment_size(512), 2 * MiB);
  EXPECT_EQ(segment_size(1 * MiB), 2 * MiB);
  EXPECT_EQ(segment_size(1 * MiB + 512), 20 * MiB);
  EXPECT_EQ(segment_size(10 * MiB - 512), 20 * MiB);
  EXPECT_EQ(segment_size(10 * MiB), 10 * MiB);
  EXPECT_EQ(segment_size(11 * MiB + 1), 12 * MiB);
}

TEST(SizeRules, PlainRoundingIsRoundSizeWithoutDivisions) {
  const AllocatorConfig config;
  std::mt19937_64 rng(5);
  for (int i = 0; i < 100'000; ++i) {
    const std::size_t size = (rng() >> (rng() % 60)) + 1;
    ASSERT_EQ(round_size_plain(size), round_size(size, config)) << size;
  }
}

TEST(SizeRules, PowerOfTwoDivisions) {
  const AllocatorConfig config = AllocatorConfig::parse("roundup_power2_divisions:4");
  EXPECT_EQ(round_size(1200 * MiB, config), 1280 * MiB);
  EXPECT_EQ(round_size(1024 * MiB, config), 1024 * MiB);
  EXPECT_EQ(round_size(1025 * MiB, config), 1280 * MiB);
  EXPECT_EQ(round_size(1800 * MiB, config), 2048 * MiB);
  EXPECT_EQ(round_size(1500, config), 1536U);  // below 512 x divisions: plain rounding
}

TEST(SizeRules, SplitAndServe) {
  constexpr std::size_t kUnlimited = AllocatorConfig::kUnlimited;
  EXPECT_TRUE(should_split(2 * MiB, 2 * MiB - 512, true, kUnlimited));
  EXPECT_FALSE(should_split(1024, 1024, true, kUnlimited));
  EXPECT_TRUE(should_split(20 * MiB, 2 * MiB, false, kUnlimited));
  EXPECT_FALSE(should_split(20 * MiB, 19 * MiB, false, kUnlimited));  // 1 MiB left: not > 1 MiB
  EXPECT_FALSE(should_split(200 * MiB, 100 * MiB, false, 64 * MiB));  // oversize
  EXPECT_FALSE(may_serve(100 * MiB, 30 * MiB, 64 * MiB));
  EXPECT_TRUE(may_serve(100 * MiB, 90 * MiB, 64 * MiB));
  EXPECT_FALSE(may_serve(120 * MiB, 90 * MiB, 64 * MiB));
}

// Reference best fit: smallest size >= request; among equal sizes the most recently inserted.
Block* reference_fit(const std::vector<Block*>& cached, std::size_t size) {
  Block* best = nullptr;
  for (Block* b : cached) {  // `cached` is in insertion order
    if (b->size >= size && (best == nullptr || b->size <= best->size)) best = b;
  }
  return best;
}

// Free bins beside the reference: blocks from a fixed store, the cached ones in insertion order.
struct BinsBesideReference {
  BinsBesideReference(bool small, std::size_t blocks) : bins(small), storage(blocks) {
    for (Block& b : storage) spare.push_back(&b);
  }
  void cache(std::size_t size) {
    Block* b = spare.back();
    spare.pop_back();
    b->size = size;
    bins.insert(b);
    cached.push_back(b);
  }
  // Takes the best fit for `want` out of both, or fails saying how they differ.
  [[nodiscard]] ::testing::AssertionResult take(std::size_t want) {
    Block* expected = reference_fit(cached, want);
    Block* got = bins.best_fit(want);
    if (got != expected) {
      return ::testing::AssertionFailure()
             << "best fit for " << want << ": a block of " << (got ? got->size : 0)
             << " bytes, the reference's of " << (expected ? expected->size : 0)
             << (got != nullptr && expected != nullptr && got->size == expected->size
                     ? " (not the most recently cached of its size)"
                     : "")
             << (bins.indexed() ? ", indexed" : ", a list");
    }
    if (got != nullptr) {
      bins.remove(got);
      cached.erase(std::find(cached.begin(), cached.end(), got));
      spare.push_back(got);
    }
    return ::testing::AssertionSuccess();
  }

  FreeBins bins;
  std::vector<Block> storage;
  std::vector<Block*> cached;
  std::vector<Block*> spare;
};

void check_bins_against_reference(bool small, std::size_t max_size, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  BinsBesideReference t(small, 4000);
  const auto random_size = [&] {
    return std::uniform_int_distribution<std::size_t>(1, max_size / 512)(rng) * 512;
  };
  for (int step = 0; step < 50'000; ++step) {
    if (!t.spare.empty() && (t.cached.empty() || rng() % 2 == 0)) {
      t.cache(random_size());
    } else {
      ASSERT_TRUE(t.take(random_size())) << "step " << step;
    }
    ASSERT_EQ(t.bins.count(), t.cached.size());
  }
}

TEST(FreeBinsTest, SmallPoolBestFitMatchesReference) {
  check_bins_against_reference(true, 2 * MiB, 1);
}

TEST(FreeBinsTest, LargePoolBestFitMatchesReference) {
  check_bins_against_reference(false, 4 * GiB, 2);
}

TEST(FreeBinsTest, LargePoolCloseSizesMatchReference) {
  check_bins_against_reference(false, 3 * MiB, 3);  // many blocks share a size class
}

// Issue 29.5: bins hold no storage of their own until they pass kLooseLimit blocks, then index
// them, and give the index back when they empty. A random walk around the threshold (and down
// to empty now and then) must give the reference's best fit in both phases, visit blocks in
// the same order, pass audit() after every step, and hold storage only while indexed.
void check_bins_across_the_threshold(bool small, std::size_t max_size, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  BinsBesideReference t(small, 200);
  FreeBins& bins = t.bins;
  const std::vector<Block*>& cached = t.cached;
  const auto random_size = [&] {
    // Few distinct sizes, so equal sizes (the LIFO tie) are common.
    return std::uniform_int_distribution<std::size_t>(1, 24)(rng) * (max_size / 24 / 512) * 512;
  };
  int indexed_steps = 0;
  int list_steps = 0;
  bool draining = false;
  for (int step = 0; step < 30'000; ++step) {
    if (step % 2000 == 1999) draining = true;
    if (cached.empty()) draining = false;
    const std::size_t limit = FreeBins::kLooseLimit;
    const unsigned insert_odds = draining                    ? 0
                                 : cached.size() < limit / 2 ? 80
                                 : cached.size() > 2 * limit ? 20
                                                             : 50;
    if (!t.spare.empty() && rng() % 100 < insert_odds) {
      t.cache(random_size());
    } else {
      ASSERT_TRUE(t.take(draining ? 0 : random_size())) << "step " << step;
    }
    std::vector<const Block*> held;
    const FreeBins::Problem problem = bins.audit(held);
    ASSERT_EQ(problem.what, nullptr) << "step " << step << ": " << problem.what;
    ASSERT_EQ(held.size(), cached.size());
    // for_each: every block, smallest first, the most recently cached first among equals.
    std::vector<Block*> order;
    bins.for_each(0, [&](Block* b) { order.push_back(b); });
    ASSERT_EQ(order.size(), cached.size());
    for (std::size_t i = 1; i < order.size(); ++i) {
      ASSERT_TRUE(SizeTreap::before(order[i - 1], order[i]))
          << "step " << step << " position " << i;
    }
    if (cached.size() > limit) {
      ASSERT_TRUE(bins.indexed()) << "step " << step;
    }
    if (cached.empty()) {
      ASSERT_FALSE(bins.indexed()) << "step " << step;
    }
    ASSERT_EQ(bins.storage_bytes() != 0, bins.indexed());
    (bins.indexed() ? indexed_steps : list_steps) += 1;
  }
  EXPECT_GT(indexed_steps, 500);  // the walk spent time in both phases
  EXPECT_GT(list_steps, 500);
}

TEST(FreeBinsTest, SmallPoolAcrossTheIndexThresholdMatchesReference) {
  check_bins_across_the_threshold(true, 2 * MiB, 5);
}

TEST(FreeBinsTest, LargePoolAcrossTheIndexThresholdMatchesReference) {
  check_bins_across_the_threshold(false, 200 * MiB, 6);
}

// Issue 43: among blocks of the best size the lowest address serves, however many share the
// size. The lowest went in first, so it is the oldest: the scan this replaced looked at the 64
// most recently cached of the size only, and took another. for_each visits equal sizes by
// address too.
TEST(FreeBinsTest, AmongManyBlocksOfOneSizeTheLowestAddressServes) {
  for (const bool small : {true, false}) {
    SCOPED_TRACE(small ? "small pool" : "large pool");
    const std::size_t size = small ? 64 * KiB : 4 * MiB;
    FreeBins bins(small);
    std::vector<Block> storage(200);
    for (std::size_t i = 0; i < storage.size(); ++i) {
      storage[i].size = size;
      // Addresses 1 GiB apart and shuffled a little, the lowest (index 0) cached first.
      storage[i].address = GiB * (i == 0 ? 1 : 2 + (i * 7919) % storage.size());
      bins.insert(&storage[i]);
    }
    ASSERT_TRUE(bins.indexed());
    EXPECT_EQ(bins.best_fit(size), &storage[0]);
    EXPECT_EQ(bins.best_fit(size - 512), &storage[0]);
    std::uintptr_t previous = 0;
    bins.for_each(0, [&](Block* b) {
      EXPECT_GT(b->address, previous);
      previous = b->address;
    });
    bins.remove(&storage[0]);
    const Block* next = bins.best_fit(size);
    ASSERT_NE(next, nullptr);
    for (std::size_t i = 1; i < storage.size(); ++i) EXPECT_LE(next->address, storage[i].address);
    std::vector<const Block*> held;
    EXPECT_EQ(bins.audit(held).what, nullptr);
  }
}

TEST(FreeBinsTest, LargePoolManySizesInOneClassMatchReference) {
  // Every block within one size class (3 MiB .. 3 MiB + 192 KiB): the case a list made linear.
  std::mt19937_64 rng(4);
  FreeBins bins(false);
  std::vector<Block> storage(20'000);
  std::vector<Block*> cached;
  for (Block& b : storage) {
    b.size = 3 * MiB + std::uniform_int_distribution<std::size_t>(0, 384)(rng) * 512;
    bins.insert(&b);
    cached.push_back(&b);
  }
  for (int i = 0; i < 2000; ++i) {
    const std::size_t want =
        3 * MiB + std::uniform_int_distribution<std::size_t>(0, 400)(rng) * 512;
    Block* expected = reference_fit(cached, want);
    Block* got = bins.best_fit(want);
    ASSERT_EQ(got, expected) << "request " << want;
    if (got == nullptr) continue;
    bins.remove(got);
    cached.erase(std::find(cached.begin(), cached.end(), got));
    if (i % 2 == 0) {  // give it back: it becomes the most recent of its size
      bins.insert(got);
      cached.push_back(got);
    }
  }
  std::size_t visited = 0;
  std::size_t previous = 0;
  bins.for_each(0, [&](Block* b) {
    EXPECT_GE(b->size, previous);  // in size order
    previous = b->size;
    ++visited;
  });
  EXPECT_EQ(visited, cached.size());
}

TEST(PointerMapTest, MatchesUnorderedMap) {
  std::mt19937_64 rng(9);
  PointerMap map;
  std::unordered_map<std::uintptr_t, Block*> reference;
  std::vector<std::uintptr_t> keys;
  for (int step = 0; step < 200'000; ++step) {
    if (keys.empty() || rng() % 3 != 0) {
      const std::uintptr_t key = (rng() % (1U << 20) + 1) * 512;
      if (reference.contains(key)) continue;
      auto* value = reinterpret_cast<Block*>(key * 3);  // NOLINT: an opaque tag, never used
      map.insert(key, value);
      reference[key] = value;
      keys.push_back(key);
    } else {
      const std::size_t i = rng() % keys.size();
      const std::uintptr_t key = keys[i];
      ASSERT_EQ(map.find(key), reference[key]);
      ASSERT_EQ(map.erase(key), reference[key]);
      ASSERT_EQ(map.find(key), nullptr);
      ASSERT_EQ(map.erase(key), nullptr);
      reference.erase(key);
      keys[i] = keys.back();
      keys.pop_back();
    }
    ASSERT_EQ(map.size(), reference.size());
  }
  for (const auto& [key, value] : reference) ASSERT_EQ(map.find(key), value);
}

// Block addresses come in strides (a segment's blocks, segments of one size); the hash
// multiplies the address with its zero low bits, so every stride must still spread and every
// key stay findable through growth and backward-shift deletion.
TEST(PointerMapTest, AddressStridesStayFindable) {
  for (const std::uintptr_t stride :
       {std::uintptr_t{512}, std::uintptr_t{4096}, std::uintptr_t{2} << 20,
        std::uintptr_t{16} << 20, std::uintptr_t{256} << 20}) {
    SCOPED_TRACE(stride);
    PointerMap map;
    const std::uintptr_t base = std::uintptr_t{0x7f12} << 32;
    constexpr std::uintptr_t kKeys = 5000;
    const auto tag = [](std::uintptr_t key) {
      return reinterpret_cast<Block*>(key + 8);  // NOLINT: an opaque tag, never used
    };
    for (std::uintptr_t i = 0; i < kKeys; ++i)
      map.insert(base + i * stride, tag(base + i * stride));
    for (std::uintptr_t i = 0; i < kKeys; ++i) {
      ASSERT_EQ(map.find(base + i * stride), tag(base + i * stride)) << i;
    }
    ASSERT_EQ(map.find(base + kKeys * stride), nullptr);
    for (std::uintptr_t i = 0; i < kKeys; i += 2) {
      ASSERT_EQ(map.erase(base + i * stride), tag(base + i * stride)) << i;
    }
    for (std::uintptr_t i = 0; i < kKeys; ++i) {
      ASSERT_EQ(map.find(base + i * stride), i % 2 == 0 ? nullptr : tag(base + i * stride)) << i;
    }
    EXPECT_EQ(map.size(), kKeys / 2);
  }
}

}  // namespace
}  // namespace memscope::detail
