// AllocatorCoreTestAccess: reaches into AllocatorCore (a friend) so that tests can break one
// invariant at a time (validate_test.cpp) or look at bookkeeping the public API does not show
// (expandable_page_donors_test.cpp). For tests only; not synchronised, like the core.
#pragma once

#include <cstddef>
#include <cstdint>

#include "allocator/allocator_core.hpp"

namespace memscope {

class AllocatorCoreTestAccess {
 public:
  static MemoryStats& stats(AllocatorCore& core) { return core.statistics_.kept_; }
  static StatArray& waiting(AllocatorCore& core) { return core.statistics_.waiting_; }
  static unsigned& off_hot_path(AllocatorCore& core) { return core.off_hot_path_; }
  static detail::PointerMap& live(AllocatorCore& core) { return core.store_.live(); }
  static detail::Block* block(AllocatorCore& core, const void* ptr) {
    return core.store_.live().find(reinterpret_cast<std::uintptr_t>(ptr));
  }
  static std::size_t stream_pools(const AllocatorCore& core) { return core.store_.stream_count(); }
  static std::size_t& segment_count(AllocatorCore& core, StreamId stream) {
    return core.store_.pools_of(stream)->segments;
  }
  // Page recycling: the bins listed as holding a whole free page, and how many bins the
  // recycling walks have searched so far.
  static std::size_t page_donors(const AllocatorCore& core) {
    return core.store_.page_donors(true).count + core.store_.page_donors(false).count;
  }
  static std::uint64_t bins_searched_for_pages(const AllocatorCore& core) {
    return core.expandable_.bins_searched_for_pages();
  }
};

}  // namespace memscope
