// AllocatorCoreTestAccess: reaches into AllocatorCore (a friend) so that validate_test.cpp can
// break one invariant at a time and see validate() name it. What tests only look at, they read
// through the components' own interfaces (AllocatorCore::block_store(), expandable_segments()).
// For tests only; not synchronised, like the core.
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
  static std::size_t& segment_count(AllocatorCore& core, StreamId stream) {
    return core.store_.pools_of(stream)->segments;
  }
};

}  // namespace memscope
