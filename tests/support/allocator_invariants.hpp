// Invariants every CachingAllocator state must satisfy. The allocator checks its own
// bookkeeping in CachingAllocator::validate() (blocks tile their segments, the cache holds
// exactly the free blocks, the statistics equal what the blocks say, current <= peak); this
// adds what only a user of the public API sees: the exported snapshot is in address order and
// its per-segment sums agree with its blocks.
// Shared by the allocator tests on every backend (host, simulated, CUDA).
#pragma once

#include <gtest/gtest.h>

#include "memscope/caching_allocator.hpp"
#include "memscope/errors.hpp"

namespace memscope::testing {

// Success, or a failure naming the broken invariant.
inline ::testing::AssertionResult validated(const CachingAllocator& allocator) {
  try {
    allocator.validate();
  } catch (const InternalError& e) {
    return ::testing::AssertionFailure() << e.what();
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult snapshot_consistent(const Snapshot& snap) {
  std::uintptr_t previous = 0;
  for (const SegmentInfo& s : snap.segments) {
    if (s.address < previous) return ::testing::AssertionFailure() << "segments out of order";
    previous = s.address;
    std::size_t allocated = 0;
    std::size_t active = 0;
    std::size_t requested = 0;
    for (const BlockInfo& b : s.blocks) {
      if (b.state == BlockState::active_allocated) allocated += b.size;
      if (b.state != BlockState::inactive) {
        active += b.size;
        requested += b.requested_size;
      }
    }
    if (allocated != s.allocated_size || active != s.active_size || requested != s.requested_size) {
      return ::testing::AssertionFailure()
             << "segment " << s.address << ": its sums disagree with its blocks";
    }
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult allocator_consistent(const CachingAllocator& allocator) {
  ::testing::AssertionResult result = validated(allocator);
  return result ? snapshot_consistent(allocator.snapshot()) : result;
}

}  // namespace memscope::testing
