// Invariants every CachingAllocator state must satisfy, checked from the outside: statistics
// rebuilt from a snapshot equal the live statistics; blocks tile their segments exactly; no two
// live blocks overlap; every block is 512-byte aligned; current never exceeds peak.
// Shared by the allocator tests on every backend (host, simulated, CUDA).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "memscope/caching_allocator.hpp"

namespace memscope::testing {

// Success, or a failure naming the first broken invariant, so callers running 100,000 steps
// can stop at the first failure and print the step number.
// `live` and `snap` must be taken with no allocator call in between.
inline ::testing::AssertionResult consistent(const MemoryStats& live, const Snapshot& snap) {
  const MemoryStats rebuilt = snap.totals();
  const auto check = [](const StatArray& a, const StatArray& b, const char* name) -> std::string {
    static const char* const kPools[] = {"all", "small_pool", "large_pool"};
    for (std::size_t p = 0; p < kStatPools; ++p) {
      if (a[p].current != b[p].current) {
        return std::string(name) + "." + kPools[p] + ".current: live " +
               std::to_string(a[p].current) + " vs snapshot " + std::to_string(b[p].current);
      }
      if (a[p].current > a[p].peak) return std::string(name) + " current above peak";
    }
    return "";
  };
  const std::pair<const char*, std::pair<const StatArray*, const StatArray*>> families[] = {
      {"allocation", {&live.allocation, &rebuilt.allocation}},
      {"segment", {&live.segment, &rebuilt.segment}},
      {"active", {&live.active, &rebuilt.active}},
      {"inactive_split", {&live.inactive_split, &rebuilt.inactive_split}},
      {"allocated_bytes", {&live.allocated_bytes, &rebuilt.allocated_bytes}},
      {"reserved_bytes", {&live.reserved_bytes, &rebuilt.reserved_bytes}},
      {"active_bytes", {&live.active_bytes, &rebuilt.active_bytes}},
      {"inactive_split_bytes", {&live.inactive_split_bytes, &rebuilt.inactive_split_bytes}},
      {"requested_bytes", {&live.requested_bytes, &rebuilt.requested_bytes}},
  };
  for (const auto& [name, pair] : families) {
    const std::string problem = check(*pair.first, *pair.second, name);
    if (!problem.empty()) return ::testing::AssertionFailure() << problem;
  }
  std::uintptr_t previous_end = 0;
  for (const SegmentInfo& s : snap.segments) {
    if (s.address < previous_end) return ::testing::AssertionFailure() << "segments overlap";
    previous_end = s.address + s.total_size;
    std::uintptr_t cursor = s.address;
    for (std::size_t i = 0; i < s.blocks.size(); ++i) {
      const BlockInfo& b = s.blocks[i];
      if (b.address != cursor) return ::testing::AssertionFailure() << "gap or overlap in segment";
      if (b.address % 512 != 0) return ::testing::AssertionFailure() << "block not 512-aligned";
      if (b.size == 0 || b.size % 512 != 0) return ::testing::AssertionFailure() << "bad size";
      if (b.state != BlockState::inactive && b.requested_size > b.size) {
        return ::testing::AssertionFailure() << "requested above block size";
      }
      // Two cached neighbours would have been merged.
      if (i > 0 && b.state == BlockState::inactive &&
          s.blocks[i - 1].state == BlockState::inactive) {
        return ::testing::AssertionFailure() << "adjacent inactive blocks not merged";
      }
      cursor += b.size;
    }
    if (cursor != s.address + s.total_size) {
      return ::testing::AssertionFailure() << "blocks do not cover their segment";
    }
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult allocator_consistent(const CachingAllocator& allocator) {
  const MemoryStats live = allocator.stats();
  return consistent(live, allocator.snapshot());
}

}  // namespace memscope::testing
