// SimulatedBackend's page mapping: exact accounting (free_bytes, reserved_bytes, mapped_bytes)
// and caller bugs made visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "memscope/errors.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

constexpr std::size_t kPage = 2 * MiB;

char* at(void* base, std::size_t offset) {
  return static_cast<char*>(base) + offset;
}

TEST(SimulatedPages, MappedPagesCountAgainstTheCapacityExactly) {
  SimulatedBackend sim(64 * MiB);
  EXPECT_EQ(sim.page_granularity(), 2 * MiB);
  void* r = sim.reserve_address_range(256 * MiB);  // larger than the device: address space only
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(sim.free_bytes(), 64 * MiB);
  EXPECT_EQ(sim.reserved_bytes(), 0U);

  void* segment = sim.reserve(10 * MiB);
  ASSERT_NE(segment, nullptr);
  ASSERT_TRUE(sim.map_pages(r, 8 * MiB, kPage));
  EXPECT_EQ(sim.mapped_bytes(), 8 * MiB);
  EXPECT_EQ(sim.reserved_bytes(), 18 * MiB);
  EXPECT_EQ(sim.free_bytes(), 46 * MiB);

  // The byte boundary: one page more than what is free fails, exactly what is free maps.
  EXPECT_FALSE(sim.map_pages(at(r, 8 * MiB), 48 * MiB, kPage));
  EXPECT_EQ(sim.mapped_bytes(), 8 * MiB);
  ASSERT_TRUE(sim.map_pages(at(r, 8 * MiB), 46 * MiB, kPage));
  EXPECT_EQ(sim.free_bytes(), 0U);
  EXPECT_EQ(sim.reserve(kPage), nullptr);  // segments and pages share the capacity
  EXPECT_FALSE(sim.map_pages(at(r, 54 * MiB), kPage, kPage));

  sim.unmap_pages(at(r, 2 * MiB), 4 * MiB, kPage, kDefaultStream);
  EXPECT_EQ(sim.mapped_bytes(), 50 * MiB);
  EXPECT_EQ(sim.free_bytes(), 4 * MiB);
  sim.release(segment, 10 * MiB);
  EXPECT_EQ(sim.free_bytes(), 14 * MiB);

  // Moving is bookkeeping: totals stay.
  ASSERT_TRUE(sim.move_pages(at(r, 50 * MiB), at(r, 100 * MiB), 4 * MiB, kPage, kDefaultStream));
  EXPECT_EQ(sim.mapped_bytes(), 50 * MiB);
  EXPECT_EQ(sim.free_bytes(), 14 * MiB);
  ASSERT_TRUE(sim.map_pages(at(r, 50 * MiB), 4 * MiB, kPage));  // the source is unmapped
  EXPECT_THROW((void)sim.map_pages(at(r, 100 * MiB), kPage, kPage), BackendError);  // moved in

  // Releasing the range takes what is still mapped with it.
  sim.release_address_range(r, 256 * MiB);
  EXPECT_EQ(sim.mapped_bytes(), 0U);
  EXPECT_EQ(sim.free_bytes(), 64 * MiB);
}

TEST(SimulatedPages, CallerBugsAreBackendErrors) {
  SimulatedBackend sim(1 * GiB);
  void* r = sim.reserve_address_range(16 * MiB);
  ASSERT_NE(r, nullptr);
  ASSERT_TRUE(sim.map_pages(at(r, 4 * MiB), 4 * MiB, kPage));
  // Mapping a page that is mapped already, in whole or in part.
  EXPECT_THROW((void)sim.map_pages(at(r, 4 * MiB), kPage, kPage), BackendError);
  EXPECT_THROW((void)sim.map_pages(at(r, 2 * MiB), 4 * MiB, kPage), BackendError);
  EXPECT_THROW((void)sim.map_pages(at(r, 6 * MiB), 4 * MiB, kPage), BackendError);
  // Outside every range, or across its end.
  EXPECT_THROW((void)sim.map_pages(at(r, 16 * MiB), kPage, kPage), BackendError);
  EXPECT_THROW((void)sim.map_pages(at(r, 14 * MiB), 4 * MiB, kPage), BackendError);
  void* segment = sim.reserve(kPage);
  EXPECT_THROW((void)sim.map_pages(segment, kPage, kPage), BackendError);
  // Misaligned, not whole pages, a page below the granularity, a page not dividing the offset.
  EXPECT_THROW((void)sim.map_pages(at(r, 1 * MiB), kPage, kPage), BackendError);
  EXPECT_THROW((void)sim.map_pages(at(r, 10 * MiB), 3 * MiB, kPage), BackendError);
  EXPECT_THROW((void)sim.map_pages(at(r, 10 * MiB), 1 * MiB, 1 * MiB), BackendError);
  EXPECT_THROW((void)sim.map_pages(at(r, 10 * MiB), 4 * MiB, 4 * MiB), BackendError);
  EXPECT_THROW((void)sim.reserve_address_range(3 * MiB), BackendError);
  // Moves from unmapped pages or onto mapped ones.
  EXPECT_THROW((void)sim.move_pages(r, at(r, 12 * MiB), kPage, kPage, kDefaultStream),
               BackendError);
  EXPECT_THROW((void)sim.move_pages(at(r, 12 * MiB), at(r, 4 * MiB), kPage, kPage, kDefaultStream),
               BackendError);
  EXPECT_THROW(
      (void)sim.move_pages(at(r, 4 * MiB), at(r, 14 * MiB), 4 * MiB, kPage, kDefaultStream),
      BackendError);
  // None of it changed the count; unmapping what is not mapped is ignored.
  EXPECT_EQ(sim.mapped_bytes(), 4 * MiB);
  sim.unmap_pages(r, 16 * MiB, kPage, kDefaultStream);
  sim.unmap_pages(r, 16 * MiB, kPage, kDefaultStream);
  EXPECT_EQ(sim.mapped_bytes(), 0U);
  EXPECT_EQ(sim.reserved_bytes(), kPage);
  sim.release(segment, kPage);
  sim.release_address_range(r, 16 * MiB);
}

TEST(SimulatedPages, RangesAreNotReusedWhileTheAddressSpaceLasts) {
  SimulatedBackend sim(1 * GiB);
  void* a = sim.reserve_address_range(8 * MiB);
  void* s = sim.reserve(4 * MiB);
  sim.release_address_range(a, 8 * MiB);
  void* b = sim.reserve_address_range(8 * MiB);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_GE(reinterpret_cast<std::uintptr_t>(b), reinterpret_cast<std::uintptr_t>(s) + 4 * MiB);
  EXPECT_THROW((void)sim.map_pages(a, kPage, kPage), BackendError);  // a released range
  sim.release(s, 4 * MiB);
  sim.release_address_range(b, 8 * MiB);
}

// Once the 2^56 bytes of simulated address space are used up, released ranges are reused, as
// a real device's are: page recycling across 20,000 streams of a 4 TiB device released and
// reserved ranges until reservations failed with the device empty.
TEST(SimulatedPages, ReleasedRangesAreReusedOnceTheAddressSpaceIsUsedUp) {
  SimulatedBackend sim(1 * GiB);
  constexpr std::size_t kHalf = std::size_t{1} << 55;
  void* a = sim.reserve_address_range(kHalf);
  ASSERT_NE(a, nullptr);
  sim.release_address_range(a, kHalf);
  void* b = sim.reserve_address_range(kHalf);  // less than half is left unused: a's hole
  EXPECT_EQ(b, a);
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(sim.map_pages(b, kPage, kPage));           // a range like any other
  EXPECT_EQ(sim.reserve_address_range(kHalf), nullptr);  // no hole fits: a clean failure
  sim.release_address_range(b, kHalf);
  EXPECT_EQ(sim.mapped_bytes(), 0U);
}

// Random reservations and releases that use the address space up many times over, against a
// model of the held ranges: no two held ranges overlap, and after everything is released
// holes coalesce, so every size that was ever reserved fits again.
TEST(SimulatedPages, RandomRangesNeverOverlapAndHolesCoalesce) {
  SimulatedBackend sim(1 * GiB);
  std::mt19937_64 rng(56);
  std::map<std::uintptr_t, std::size_t> held;
  std::vector<std::size_t> reserved_sizes;
  for (int step = 0; step < 4000; ++step) {
    if (held.empty() || rng() % 100 < 55) {
      const std::size_t bytes = std::size_t{1} << (21 + rng() % 32);  // 2 MiB to 2^52
      void* r = sim.reserve_address_range(bytes);
      if (r == nullptr) continue;
      const auto base = reinterpret_cast<std::uintptr_t>(r);
      const auto next = held.lower_bound(base);
      ASSERT_TRUE(next == held.end() || base + bytes <= next->first) << step;
      ASSERT_TRUE(next == held.begin() || std::prev(next)->first + std::prev(next)->second <= base)
          << step;
      held.emplace(base, bytes);
      reserved_sizes.push_back(bytes);
    } else {
      auto victim = held.begin();
      std::advance(victim, static_cast<std::ptrdiff_t>(rng() % held.size()));
      sim.release_address_range(reinterpret_cast<void*>(victim->first), victim->second);
      held.erase(victim);
    }
  }
  ASSERT_GT(reserved_sizes.size(), 1000U);
  for (const auto& [base, bytes] : held) {
    sim.release_address_range(reinterpret_cast<void*>(base), bytes);
  }
  std::sort(reserved_sizes.begin(), reserved_sizes.end());
  void* largest = sim.reserve_address_range(reserved_sizes.back());
  EXPECT_NE(largest, nullptr) << "released holes did not coalesce";
  sim.release_address_range(largest, reserved_sizes.back());
}

// Random maps, unmaps and moves on page slots of two ranges, against a model: each call maps
// exactly when the model says it fits, throws exactly when it overlaps mapped pages, and the
// totals match the model after every step.
TEST(SimulatedPages, RandomOperationsKeepExactAccounting) {
  constexpr std::size_t kSlots = 48;
  SimulatedBackend sim(40 * kPage);  // less than the slots: some maps must fail
  std::vector<void*> ranges = {sim.reserve_address_range(kSlots * kPage),
                               sim.reserve_address_range(kSlots * kPage)};
  std::vector<std::vector<bool>> mapped(2, std::vector<bool>(kSlots, false));
  std::size_t total = 0;
  std::mt19937 random(2026);
  auto count = [&](std::size_t range, std::size_t first, std::size_t n) {
    std::size_t c = 0;
    for (std::size_t i = first; i < first + n; ++i) c += mapped[range][i] ? 1U : 0U;
    return c;
  };
  for (int step = 0; step < 5000; ++step) {
    const std::size_t range = random() % 2;
    const std::size_t n = 1 + random() % 6;
    const std::size_t first = random() % (kSlots - n + 1);
    void* address = at(ranges[range], first * kPage);
    const std::size_t already = count(range, first, n);
    switch (random() % 3) {
      case 0:
        if (already > 0) {
          EXPECT_THROW((void)sim.map_pages(address, n * kPage, kPage), BackendError) << step;
        } else {
          const bool fits = total + n <= 40;
          ASSERT_EQ(sim.map_pages(address, n * kPage, kPage), fits) << step;
          if (fits) {
            for (std::size_t i = first; i < first + n; ++i) mapped[range][i] = true;
            total += n;
          }
        }
        break;
      case 1:
        sim.unmap_pages(address, n * kPage, kPage, kDefaultStream);
        for (std::size_t i = first; i < first + n; ++i) mapped[range][i] = false;
        total -= already;
        break;
      default: {
        const std::size_t to_range = random() % 2;
        const std::size_t to_first = random() % (kSlots - n + 1);
        const bool disjoint = to_range != range || to_first + n <= first || first + n <= to_first;
        if (!disjoint) break;
        void* to = at(ranges[to_range], to_first * kPage);
        if (already != n || count(to_range, to_first, n) != 0) {
          EXPECT_THROW((void)sim.move_pages(address, to, n * kPage, kPage, kDefaultStream),
                       BackendError)
              << step;
        } else {
          ASSERT_TRUE(sim.move_pages(address, to, n * kPage, kPage, kDefaultStream)) << step;
          for (std::size_t i = 0; i < n; ++i) {
            mapped[range][first + i] = false;
            mapped[to_range][to_first + i] = true;
          }
        }
        break;
      }
    }
    ASSERT_EQ(sim.mapped_bytes(), total * kPage) << step;
    ASSERT_EQ(sim.free_bytes(), (40 - total) * kPage) << step;
  }
  sim.release_address_range(ranges[0], kSlots * kPage);
  sim.release_address_range(ranges[1], kSlots * kPage);
  EXPECT_EQ(sim.mapped_bytes(), 0U);
}

// Several allocators may share one backend: threads mapping, moving and unmapping in their own
// ranges at once leave exact totals.
TEST(SimulatedPages, ConcurrentCallersKeepExactTotals) {
  constexpr std::size_t kThreads = 4;
  constexpr std::size_t kSlots = 32;
  SimulatedBackend sim(kThreads * kSlots * kPage);  // room for everything: no map may fail
  std::vector<std::size_t> left_mapped(kThreads, 0);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&sim, &left_mapped, t] {
      void* r = sim.reserve_address_range(kSlots * kPage);
      std::vector<bool> mapped(kSlots, false);
      std::mt19937 random(static_cast<unsigned>(100 + t));
      for (int step = 0; step < 3000; ++step) {
        const std::size_t i = random() % kSlots;
        const std::size_t j = random() % kSlots;
        if (!mapped[i]) {
          if (!sim.map_pages(at(r, i * kPage), kPage, kPage)) return;  // fails the totals below
          mapped[i] = true;
        } else if (!mapped[j]) {
          (void)sim.move_pages(at(r, i * kPage), at(r, j * kPage), kPage, kPage, kDefaultStream);
          mapped[i] = false;
          mapped[j] = true;
        } else {
          sim.unmap_pages(at(r, i * kPage), kPage, kPage, kDefaultStream);
          mapped[i] = false;
        }
      }
      for (const bool m : mapped) left_mapped[t] += m ? kPage : 0;
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::size_t expected = 0;
  for (const std::size_t bytes : left_mapped) expected += bytes;
  EXPECT_GT(expected, 0U);
  EXPECT_EQ(sim.mapped_bytes(), expected);
  EXPECT_EQ(sim.free_bytes(), kThreads * kSlots * kPage - expected);
}

}  // namespace
}  // namespace memscope
