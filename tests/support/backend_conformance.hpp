// The backend conformance suite: what every Backend must do, written once and instantiated for
// each backend in one line (as RMM does for its memory resources):
//
//   struct MyTraits { static std::shared_ptr<Backend> make(); static std::string unavailable(); };
//   INSTANTIATE_TYPED_TEST_SUITE_P(Mine, BackendConformance, ::testing::Types<MyTraits>);
//
// unavailable() returns "" when the backend can run here, else the reason, and every test then
// reports SKIPPED with that reason (never a silent pass).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "allocator_invariants.hpp"
#include "memscope/backend.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/units.hpp"

namespace memscope::testing {

template <class Traits>
class BackendConformance : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = Traits::unavailable();
    if (!why.empty()) GTEST_SKIP() << why;
    backend = Traits::make();
  }
  std::shared_ptr<Backend> backend;
};

TYPED_TEST_SUITE_P(BackendConformance);

TYPED_TEST_P(BackendConformance, DescribesItself) {
  Backend& b = *this->backend;
  EXPECT_FALSE(b.name().empty());
  EXPECT_GT(b.capacity(), 0U);
  EXPECT_LE(b.free_bytes(), b.capacity());
  const auto again = make_backend(b.name());  // the name is a spec that builds it again
  EXPECT_EQ(again->name(), b.name());
  EXPECT_EQ(again->memory_kind(), b.memory_kind());
}

TYPED_TEST_P(BackendConformance, ReservesAlignedDisjointSegments) {
  Backend& b = *this->backend;
  std::vector<std::pair<void*, std::size_t>> segments;
  for (const std::size_t size : {2 * MiB, 20 * MiB, 2 * MiB, 6 * MiB}) {
    void* p = b.reserve(size);
    ASSERT_NE(p, nullptr) << size;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 512, 0U);
    segments.emplace_back(p, size);
  }
  for (std::size_t i = 0; i < segments.size(); ++i) {
    for (std::size_t j = i + 1; j < segments.size(); ++j) {
      const auto a = reinterpret_cast<std::uintptr_t>(segments[i].first);
      const auto c = reinterpret_cast<std::uintptr_t>(segments[j].first);
      EXPECT_TRUE(a + segments[i].second <= c || c + segments[j].second <= a);
    }
  }
  if (b.memory_kind() == MemoryKind::host) {
    for (const auto& [p, size] : segments) std::memset(p, 0x5a, size);
  }
  for (const auto& [p, size] : segments) b.release(p, size);
}

TYPED_TEST_P(BackendConformance, ReportsOutOfMemoryAsNull) {
  Backend& b = *this->backend;
  void* p = b.reserve(b.capacity() + 64 * MiB);
  EXPECT_EQ(p, nullptr);
  void* q = b.reserve(2 * MiB);  // still usable
  ASSERT_NE(q, nullptr);
  b.release(q, 2 * MiB);
}

TYPED_TEST_P(BackendConformance, ReleasedMemoryComesBack) {
  Backend& b = *this->backend;
  for (int i = 0; i < 200; ++i) {
    void* p = b.reserve(8 * MiB);
    ASSERT_NE(p, nullptr) << "iteration " << i << ": released segments were not given back";
    b.release(p, 8 * MiB);
  }
}

TYPED_TEST_P(BackendConformance, EventsCompleteAfterSynchronize) {
  Backend& b = *this->backend;
  const EventId e = b.create_event();
  b.record_event(e, kDefaultStream);
  b.synchronize_event(e);
  EXPECT_TRUE(b.query_event(e));
  b.record_event(e, kDefaultStream);  // events are reusable
  b.synchronize_event(e);
  EXPECT_TRUE(b.query_event(e));
  b.destroy_event(e);
}

TYPED_TEST_P(BackendConformance, CarriesACachingAllocator) {
  CachingAllocator allocator(this->backend, AllocatorConfig{});
  std::vector<void*> blocks;
  for (const std::size_t size : {std::size_t{1}, 4 * KiB, 1 * MiB, 3 * MiB, 24 * MiB}) {
    blocks.push_back(allocator.allocate(size));
  }
  EXPECT_TRUE(allocator_consistent(allocator));
  for (void* p : blocks) allocator.deallocate(p);
  EXPECT_GT(allocator.empty_cache(), 0U);
  EXPECT_EQ(allocator.stats().reserved_bytes[0].current, 0);
}

REGISTER_TYPED_TEST_SUITE_P(BackendConformance, DescribesItself, ReservesAlignedDisjointSegments,
                            ReportsOutOfMemoryAsNull, ReleasedMemoryComesBack,
                            EventsCompleteAfterSynchronize, CarriesACachingAllocator);

}  // namespace memscope::testing
