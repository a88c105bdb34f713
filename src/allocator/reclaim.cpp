#include "allocator/reclaim.hpp"

#include "allocator/block_store.hpp"
#include "allocator/segment_source.hpp"

namespace memscope::detail {

bool Reclaim::call_free_memory_callbacks() {
  bool freed = false;
  for (const auto& callback : free_memory_callbacks_) freed = callback() || freed;
  return freed;
}

std::size_t Reclaim::garbage_target(std::size_t reserved, std::size_t limit) const noexcept {
  const auto threshold = static_cast<std::size_t>(gc_threshold_ * static_cast<double>(limit));
  return reserved <= threshold ? 0 : reserved - threshold;
}

void Reclaim::collect_garbage(const BlockStore& store, SegmentSource& source, std::size_t target,
                              std::uint64_t clock) {
  // Large cached segments, by age (allocations since they were cached); with expandable
  // segments, large cached blocks with whole pages inside, whose pages are unmapped.
  std::vector<Block*> freeable;
  store.for_each_pools([&source, &freeable](StreamId, const StreamPools& pools) {
    pools.large.for_each(0, [&source, &freeable](Block* b) {
      if (source.collectable(*b)) freeable.push_back(b);
    });
  });
  collect(freeable, target, clock, [&source](Block* b) { return source.collect(b); });
}

}  // namespace memscope::detail
