// The page-mapping conformance suite: what every backend that maps pages (backend.hpp,
// page_granularity() above zero) must do for the allocator's expandable segments, written once
// and instantiated per backend with the same traits as BackendConformance:
//
//   INSTANTIATE_TYPED_TEST_SUITE_P(Mine, PageMappingConformance, ::testing::Types<MyTraits>);
//
// Every test reports SKIPPED with the reason when the backend cannot run here, or when it does
// not map pages (granularity 0). Host memory is written and read back to prove it is usable;
// the host- and simulated-only files check the kernel's numbers and exact accounting.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "memscope/backend.hpp"
#include "memscope/units.hpp"

namespace memscope::testing {

template <class Traits>
class PageMappingConformance : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = Traits::unavailable();
    if (!why.empty()) GTEST_SKIP() << why;
    backend = Traits::make();
    granularity = backend->page_granularity();
    if (granularity == 0) GTEST_SKIP() << backend->name() << " does not map pages (granularity 0)";
    // 2 MiB pages, the allocator's default, or the granularity when that is larger.
    page = std::max<std::size_t>(granularity, 2 * MiB);
  }

  static char* at(void* base, std::size_t offset) { return static_cast<char*>(base) + offset; }

  // On host memory: fills [p, p + bytes) with `value` and checks it reads back.
  void touch(void* p, std::size_t bytes, unsigned char value) const {
    if (backend->memory_kind() != MemoryKind::host) return;
    std::memset(p, value, bytes);
    const auto* bytes_at = static_cast<const unsigned char*>(p);
    EXPECT_EQ(bytes_at[0], value);
    EXPECT_EQ(bytes_at[bytes - 1], value);
  }
  // On host memory: true when every byte of [p, p + bytes) is `value`.
  [[nodiscard]] bool holds(const void* p, std::size_t bytes, unsigned char value) const {
    if (backend->memory_kind() != MemoryKind::host) return true;
    const auto* b = static_cast<const unsigned char*>(p);
    return std::all_of(b, b + bytes, [value](unsigned char c) { return c == value; });
  }

  std::shared_ptr<Backend> backend;
  std::size_t granularity = 0;
  std::size_t page = 0;
};

TYPED_TEST_SUITE_P(PageMappingConformance);

TYPED_TEST_P(PageMappingConformance, GranularityIsAPowerOfTwo) {
  const std::size_t g = this->granularity;
  EXPECT_EQ(g & (g - 1), 0U) << g;
  EXPECT_GE(g, 4 * KiB);
}

TYPED_TEST_P(PageMappingConformance, ReservesAlignedDisjointRanges) {
  Backend& b = *this->backend;
  const std::size_t free_before = b.free_bytes();
  void* r1 = b.reserve_address_range(16 * this->page);
  void* r2 = b.reserve_address_range(4 * this->page);
  ASSERT_NE(r1, nullptr);
  ASSERT_NE(r2, nullptr);
  const auto a1 = reinterpret_cast<std::uintptr_t>(r1);
  const auto a2 = reinterpret_cast<std::uintptr_t>(r2);
  EXPECT_EQ(a1 % this->granularity, 0U);
  EXPECT_EQ(a2 % this->granularity, 0U);
  EXPECT_TRUE(a1 + 16 * this->page <= a2 || a2 + 4 * this->page <= a1);
  if (b.memory_kind() == MemoryKind::simulated) {
    EXPECT_EQ(b.free_bytes(), free_before);  // address space only: not counted in capacity
  }
  b.release_address_range(r1, 16 * this->page);
  b.release_address_range(r2, 4 * this->page);
}

TYPED_TEST_P(PageMappingConformance, ReservesARangeAsLargeAsTheDevice) {
  // The allocator reserves its memory limit (up to the capacity) for each (stream, pool).
  Backend& b = *this->backend;
  const std::size_t bytes = (b.capacity() + this->page - 1) / this->page * this->page;
  void* r = b.reserve_address_range(bytes);
  ASSERT_NE(r, nullptr);
  ASSERT_TRUE(b.map_pages(this->at(r, bytes - this->page), this->page, this->page));
  this->touch(this->at(r, bytes - this->page), this->page, 0x11);
  b.unmap_pages(this->at(r, bytes - this->page), this->page, this->page, kDefaultStream);
  b.release_address_range(r, bytes);
}

TYPED_TEST_P(PageMappingConformance, MapsUnmapsAndMapsAgain) {
  Backend& b = *this->backend;
  const std::size_t p = this->page;
  void* r = b.reserve_address_range(4 * p);
  ASSERT_NE(r, nullptr);
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(b.map_pages(r, 4 * p, p)) << "round " << round;
    this->touch(r, 4 * p, static_cast<unsigned char>(0x40 + round));
    b.unmap_pages(r, 4 * p, p, kDefaultStream);
  }
  b.release_address_range(r, 4 * p);
}

TYPED_TEST_P(PageMappingConformance, PagesUnmapOneByOne) {
  // Pages mapped in one call unmap separately, and pages mapped separately unmap in one call.
  Backend& b = *this->backend;
  const std::size_t p = this->page;
  void* r = b.reserve_address_range(8 * p);
  ASSERT_NE(r, nullptr);
  ASSERT_TRUE(b.map_pages(r, 4 * p, p));
  this->touch(r, 4 * p, 0x21);
  b.unmap_pages(this->at(r, p), p, p, kDefaultStream);  // a hole in the middle
  EXPECT_TRUE(this->holds(r, p, 0x21));
  EXPECT_TRUE(this->holds(this->at(r, 2 * p), 2 * p, 0x21));
  ASSERT_TRUE(b.map_pages(this->at(r, p), p, p));  // the hole maps again
  this->touch(this->at(r, p), p, 0x22);
  EXPECT_TRUE(this->holds(r, p, 0x21));
  for (std::size_t i = 4; i < 8; ++i) ASSERT_TRUE(b.map_pages(this->at(r, i * p), p, p)) << i;
  this->touch(this->at(r, 4 * p), 4 * p, 0x23);
  b.unmap_pages(this->at(r, 3 * p), 4 * p, p, kDefaultStream);  // across the two calls' pages
  EXPECT_TRUE(this->holds(this->at(r, 7 * p), p, 0x23));
  for (const std::size_t i : {0U, 1U, 2U, 7U}) {
    b.unmap_pages(this->at(r, i * p), p, p, kDefaultStream);
  }
  ASSERT_TRUE(b.map_pages(r, 8 * p, p));  // all unmapped: the whole range maps in one call
  b.unmap_pages(r, 8 * p, p, kDefaultStream);
  b.release_address_range(r, 8 * p);
}

TYPED_TEST_P(PageMappingConformance, MovedPagesLeaveTheSourceUnmapped) {
  Backend& b = *this->backend;
  const std::size_t p = this->page;
  void* r = b.reserve_address_range(8 * p);
  ASSERT_NE(r, nullptr);
  ASSERT_TRUE(b.map_pages(r, 3 * p, p));
  this->touch(r, 3 * p, 0x5c);
  void* to = this->at(r, 5 * p);
  if (!b.move_pages(this->at(r, p), to, 2 * p, p, kDefaultStream)) {
    b.unmap_pages(r, 3 * p, p, kDefaultStream);
    b.release_address_range(r, 8 * p);
    GTEST_SKIP() << b.name() << " does not move pages here (move_pages returned false)";
  }
  EXPECT_TRUE(this->holds(to, 2 * p, 0x5c));  // the same memory at the new place
  EXPECT_TRUE(this->holds(r, p, 0x5c));       // the page not moved is untouched
  // The source is unmapped: it maps again; the destination is mapped: it unmaps.
  ASSERT_TRUE(b.map_pages(this->at(r, p), 2 * p, p));
  this->touch(this->at(r, p), 2 * p, 0x5d);
  EXPECT_TRUE(this->holds(to, 2 * p, 0x5c));
  // And moved pages move on, one of them alone.
  if (b.move_pages(this->at(to, p), this->at(r, 3 * p), p, p, kDefaultStream)) {
    EXPECT_TRUE(this->holds(this->at(r, 3 * p), p, 0x5c));
    b.unmap_pages(this->at(r, 3 * p), p, p, kDefaultStream);
    b.unmap_pages(to, p, p, kDefaultStream);
  } else {
    b.unmap_pages(to, 2 * p, p, kDefaultStream);
  }
  b.unmap_pages(r, 3 * p, p, kDefaultStream);
  ASSERT_TRUE(b.map_pages(r, 8 * p, p));  // everything was unmapped
  b.unmap_pages(r, 8 * p, p, kDefaultStream);
  b.release_address_range(r, 8 * p);
}

TYPED_TEST_P(PageMappingConformance, MapBeyondTheMemoryReturnsFalseAndStaysUsable) {
  Backend& b = *this->backend;
  const std::size_t p = this->page;
  // More than the whole device (host: more than MemTotal, so more than MemAvailable).
  const std::size_t bytes = (b.capacity() / p + 2) * p;
  void* r = b.reserve_address_range(bytes);
  ASSERT_NE(r, nullptr);
  const std::size_t free_before = b.free_bytes();
  EXPECT_FALSE(b.map_pages(r, bytes, p));
  if (b.memory_kind() == MemoryKind::simulated) {
    EXPECT_EQ(b.free_bytes(), free_before);
  }
  // Nothing stayed mapped: the first pages map now, and the backend works on.
  ASSERT_TRUE(b.map_pages(r, 2 * p, p));
  this->touch(r, 2 * p, 0x33);
  b.unmap_pages(r, 2 * p, p, kDefaultStream);
  b.release_address_range(r, bytes);
  void* segment = b.reserve(2 * MiB);
  ASSERT_NE(segment, nullptr);
  b.release(segment, 2 * MiB);
}

TYPED_TEST_P(PageMappingConformance, ReleasedRangesComeBack) {
  Backend& b = *this->backend;
  const std::size_t p = this->page;
  for (int i = 0; i < 50; ++i) {
    void* r = b.reserve_address_range(64 * p);
    ASSERT_NE(r, nullptr) << "iteration " << i;
    ASSERT_TRUE(b.map_pages(this->at(r, 8 * p), 2 * p, p)) << "iteration " << i;
    b.unmap_pages(this->at(r, 8 * p), 2 * p, p, kDefaultStream);
    b.release_address_range(r, 64 * p);
  }
}

REGISTER_TYPED_TEST_SUITE_P(PageMappingConformance, GranularityIsAPowerOfTwo,
                            ReservesAlignedDisjointRanges, ReservesARangeAsLargeAsTheDevice,
                            MapsUnmapsAndMapsAgain, PagesUnmapOneByOne,
                            MovedPagesLeaveTheSourceUnmapped,
                            MapBeyondTheMemoryReturnsFalseAndStaysUsable, ReleasedRangesComeBack);

}  // namespace memscope::testing
