// Peak scopes: nested, overlapping, closed out of order, under reset_peak_stats(), against a
// brute-force reference that remembers every value the counters took.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "memscope/caching_allocator.hpp"
#include "memscope/peak_windows.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

class PeakScopes : public ::testing::Test {
 protected:
  std::shared_ptr<SimulatedBackend> device = std::make_shared<SimulatedBackend>(64 * GiB);
  CachingAllocator allocator{device, AllocatorConfig{}};
};

TEST_F(PeakScopes, SeesTransientSpike) {
  PeakScope scope = allocator.peak_scope();
  void* a = allocator.allocate(100 * MiB);
  allocator.deallocate(a);
  EXPECT_EQ(scope.peak().allocated_bytes, static_cast<std::int64_t>(100 * MiB));
  EXPECT_EQ(scope.peak().reserved_bytes, static_cast<std::int64_t>(100 * MiB));
  EXPECT_EQ(scope.peak().requested_bytes, static_cast<std::int64_t>(100 * MiB));
  EXPECT_EQ(scope.begin().allocated_bytes, 0);
}

TEST_F(PeakScopes, NestedScopesAreEachExact) {
  void* base = allocator.allocate(10 * MiB);
  PeakScope outer = allocator.peak_scope();
  void* spike = allocator.allocate(50 * MiB);
  allocator.deallocate(spike);
  {
    PeakScope inner = allocator.peak_scope();
    EXPECT_EQ(inner.begin().allocated_bytes, static_cast<std::int64_t>(10 * MiB));
    void* b = allocator.allocate(20 * MiB);
    allocator.deallocate(b);
    EXPECT_EQ(inner.peak().allocated_bytes, static_cast<std::int64_t>(30 * MiB));
    EXPECT_EQ(outer.peak().allocated_bytes, static_cast<std::int64_t>(60 * MiB));
  }
  void* c = allocator.allocate(70 * MiB);
  allocator.deallocate(c);
  EXPECT_EQ(outer.peak().allocated_bytes, static_cast<std::int64_t>(80 * MiB));
  allocator.deallocate(base);
}

TEST_F(PeakScopes, InnerPeakFoldsIntoOuterWhenClosed) {
  PeakScope outer = allocator.peak_scope();
  PeakScope inner = allocator.peak_scope();
  void* a = allocator.allocate(40 * MiB);
  allocator.deallocate(a);
  inner.close();
  EXPECT_FALSE(inner.is_open());
  EXPECT_EQ(inner.peak().allocated_bytes, static_cast<std::int64_t>(40 * MiB));  // frozen
  EXPECT_EQ(outer.peak().allocated_bytes, static_cast<std::int64_t>(40 * MiB));
}

TEST_F(PeakScopes, OuterClosedFirstLeavesInnerInPlace) {
  PeakScope outer = allocator.peak_scope();
  void* a = allocator.allocate(30 * MiB);
  PeakScope inner = allocator.peak_scope();
  allocator.deallocate(a);
  outer.close();
  EXPECT_EQ(outer.peak().allocated_bytes, static_cast<std::int64_t>(30 * MiB));
  void* b = allocator.allocate(5 * MiB);
  EXPECT_EQ(inner.peak().allocated_bytes, static_cast<std::int64_t>(30 * MiB));
  allocator.deallocate(b);
  EXPECT_EQ(outer.peak().allocated_bytes, static_cast<std::int64_t>(30 * MiB));  // stays frozen
}

TEST_F(PeakScopes, UnaffectedByResetPeakStats) {
  PeakScope scope = allocator.peak_scope();
  void* a = allocator.allocate(64 * MiB);
  allocator.deallocate(a);
  allocator.reset_peak_stats();
  EXPECT_EQ(allocator.stats().allocated_bytes[0].peak, 0);
  EXPECT_EQ(scope.peak().allocated_bytes, static_cast<std::int64_t>(64 * MiB));
}

TEST_F(PeakScopes, MovedScopeKeepsWorking) {
  PeakScope a = allocator.peak_scope();
  PeakScope b = std::move(a);
  void* p = allocator.allocate(3 * MiB);
  allocator.deallocate(p);
  EXPECT_EQ(b.peak().allocated_bytes, static_cast<std::int64_t>(3 * MiB));
  EXPECT_EQ(a.peak().allocated_bytes, 0);  // NOLINT(bugprone-use-after-move): defined as empty
  a = allocator.peak_scope();
  EXPECT_TRUE(a.is_open());
}

// Brute force: each scope remembers the maximum of every value the counter took while open.
TEST_F(PeakScopes, RandomScopesMatchBruteForce) {
  std::mt19937_64 rng(42);
  std::vector<std::optional<PeakScope>> scopes(24);
  std::vector<std::int64_t> reference(scopes.size(), 0);
  std::vector<std::int64_t> frozen(scopes.size(), 0);
  std::vector<void*> live;
  for (int step = 0; step < 20'000; ++step) {
    const int op = std::uniform_int_distribution<int>(0, 99)(rng);
    const std::size_t k = std::uniform_int_distribution<std::size_t>(0, scopes.size() - 1)(rng);
    if (op < 8) {  // open or reopen scope k
      scopes[k].emplace(allocator.peak_scope());
      reference[k] = allocator.stats().allocated_bytes[0].current;
    } else if (op < 14) {  // close scope k (any order)
      if (scopes[k] && scopes[k]->is_open()) {
        scopes[k]->close();
        frozen[k] = reference[k];
      }
    } else if (op < 16) {
      allocator.reset_peak_stats();
    } else if (op < 58 || live.empty()) {
      const auto size = std::uniform_int_distribution<std::size_t>(1, 64 * MiB)(rng);
      live.push_back(allocator.allocate(size));
    } else {
      const auto i = std::uniform_int_distribution<std::size_t>(0, live.size() - 1)(rng);
      allocator.deallocate(live[i]);
      live[i] = live.back();
      live.pop_back();
    }
    const std::int64_t now = allocator.stats().allocated_bytes[0].current;
    for (std::size_t i = 0; i < scopes.size(); ++i) {
      if (!scopes[i]) continue;
      if (scopes[i]->is_open()) {
        reference[i] = std::max(reference[i], now);
        ASSERT_EQ(scopes[i]->peak().allocated_bytes, reference[i]) << "step " << step;
      } else {
        ASSERT_EQ(scopes[i]->peak().allocated_bytes, frozen[i]) << "step " << step;
      }
    }
  }
  for (void* p : live) allocator.deallocate(p);
}

// The cascade itself, on raw counters: cost per change is one window whatever the depth.
TEST(PeakWindowsTest, OnlyInnermostIsTouchedPerChange) {
  PeakWindows<1> windows;
  std::vector<PeakWindows<1>::Window> w(1000);
  for (auto& x : w) windows.open(x, {0});
  windows.observe({5});
  EXPECT_EQ(w.back().record[0], 5);
  EXPECT_EQ(w.front().record[0], 0);         // not touched...
  EXPECT_EQ(windows.peak(w.front())[0], 5);  // ...yet its peak is exact
  for (std::size_t i = w.size(); i-- > 1;) windows.close(w[i]);
  EXPECT_EQ(w.front().record[0], 5);  // folded down on close
  windows.close(w.front());
  EXPECT_TRUE(windows.empty());
}

}  // namespace
}  // namespace memscope
