// AllocatorCore's hot path, inline: a cache hit (an allocation of a size freed a moment ago on
// the same stream, taken from the front cache) and a free into the front cache, with the
// statistics they update. allocator_core.hpp includes this at its end, so CachingAllocator's
// allocate() and deallocate() run these with no call into the core (docs/design.md, "Hot
// path"); everything else is out of line in allocator_core.cpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "allocator/allocator_core.hpp"
#include "allocator/free_bins.hpp"
#include "allocator/poison.hpp"
#include "allocator/size_rules.hpp"

namespace memscope {
inline void AllocatorCore::poison(std::uintptr_t address, std::size_t size,
                                  bool on) const noexcept {
  detail::poison_region(poison_, address, size, on);
}

inline void* AllocatorCore::allocate(std::size_t size, StreamId stream) {
  if (void* p = reuse(size, stream)) [[likely]]
    return p;
  return allocate_slow(size, stream);
}

inline void* AllocatorCore::reuse(std::size_t size, StreamId stream) noexcept {
  // The hot path: the newest block of the last used stream's front cache, of this very size,
  // freed a moment ago, still in the pointer map, unsplit (docs/design.md, "Hot path"). It calls
  // nothing, so that it saves no registers. Anything with more to do (an older front-cached
  // block, another stream, pending events to look at, rounding by divisions, hooks to run,
  // active's peak to note while blocks wait) goes the whole way, allocate_slow(), which reuses
  // a front-cached block just the same.
  // No size test: a size beyond kLargestRequest rounds to 0 or to more than any block holds.
  StreamPools* const pools = store_.last_pools();
  if (pools->stream != stream || pools->recent.count == 0 || (off_hot_path_ & Gate::kReusing) != 0)
      [[unlikely]] {
    return nullptr;
  }
  detail::Block* const block =
      detail::FrontCache::take_newest(pools->recent, detail::round_size_plain(size));
  if (block == nullptr) return nullptr;
  count_allocation_while_none_waits(block, size);
  // No block lies at address 0. Telling the compiler lets it drop the caller's test of the
  // result: the test of `block` above has made it.
  if (block->address == 0) __builtin_unreachable();
  return reinterpret_cast<void*>(block->address);  // NOLINT(performance-no-int-to-ptr)
}

inline void* AllocatorCore::reuse_recent(detail::Block* block, std::size_t size) noexcept {
  count_allocation(block, size);
  if (hooks_.bits() != 0) [[unlikely]]
    hooks_.after_allocate(*block, size);
  return reinterpret_cast<void*>(block->address);  // NOLINT(performance-no-int-to-ptr)
}

inline void AllocatorCore::count_allocation(detail::Block* block, std::size_t requested) noexcept {
  count_allocation_while_none_waits(block, requested);
  // Active rose with allocation; only while blocks wait can it pass allocation's peak.
  if (statistics_.blocks_wait()) [[unlikely]]
    statistics_.note_active_peaks(block->small_pool());
}

inline void AllocatorCore::count_allocation_while_none_waits(detail::Block* block,
                                                             std::size_t requested) noexcept {
  const std::size_t pool = block->stat_pool();
  poison(block->address, block->size, false);
  block->use.allocated = true;
  block->requested_size = requested;
  statistics_.count_allocation(pool, block->size, requested);
}

inline bool AllocatorCore::deallocate(void* ptr) noexcept {
  detail::Block* block = store_.live().find(reinterpret_cast<std::uintptr_t>(ptr));
  if (block == nullptr || !block->use.allocated) return false;  // a recent block is mapped too
  if (block->use.slow_free == 0 && file_if_hot(block)) [[likely]]
    return true;
  deallocate_slow(block);
  return true;
}

inline bool AllocatorCore::free_to_front_cache(void* ptr) noexcept {
  detail::Block* block = store_.live().find(reinterpret_cast<std::uintptr_t>(ptr));
  return block != nullptr && block->freeable_at_once() && file_if_hot(block);
}

inline bool AllocatorCore::file_if_hot(detail::Block* block) noexcept {
  // The hot path, for an allocated block only its stream used: into the front cache, with room
  // there as its segment says (FrontCacheRoom, which with expandable segments is also the test
  // that placement stays as it is), nothing to record or wait for. Fixed segments pass the
  // first compare or fail both: the second costs them nothing.
  const detail::Segment& segment = *block->segment;
  detail::RecentFrees& recent = *segment.recent;
  const std::size_t count = recent.count;
  if (count < segment.room.limit ||
      (count | (reinterpret_cast<std::uintptr_t>(block->next) ^ segment.room.next)) == 0)
      [[likely]] {
    if ((off_hot_path_ & Gate::kFreeing) == 0) [[likely]] {
      uncount_allocation(block);
      file_recent(block, recent);
      return true;
    }
  }
  return false;
}

inline void AllocatorCore::uncount_allocation(detail::Block* block) noexcept {
  const std::size_t pool = block->stat_pool();
  block->use.allocated = false;
  statistics_.uncount_allocation(pool, block->size);
}

inline void AllocatorCore::file_recent(detail::Block* block, detail::RecentFrees& recent) noexcept {
  uncount_active(block);
  detail::FrontCache::file(block, recent);
  poison(block->address, block->size);
}

inline void AllocatorCore::uncount_active(const detail::Block* block) noexcept {
  statistics_.uncount_requested(block->stat_pool(), block->requested_size);
}

}  // namespace memscope
