#include "allocator/fixed_segments.hpp"

#include <vector>

#include "allocator/poison.hpp"
#include "allocator/size_rules.hpp"

namespace memscope::detail {

Block* FixedSegments::grow(StreamPools& pools, bool small, std::size_t rounded) {
  return reserve(segment_size(rounded), pools, small);
}

Block* FixedSegments::reserve(std::size_t size, StreamPools& pools, bool small) {
  if (size > memory_limit_ ||
      static_cast<std::size_t>(statistics_.reserved_bytes()) > memory_limit_ - size) {
    return nullptr;
  }
  void* base = backend_.reserve(size);
  if (base == nullptr) return nullptr;
  Segment* segment = store_.add_segment(pools, small, base, size);
  Block* block = segment->first;
  host_.record_segment_event(TraceAction::segment_alloc, segment->base, size, pools.stream);
  statistics_.count_segment(small, size);
  return block;
}

void FixedSegments::release(Block* block) noexcept {
  Segment* segment = block->segment;
  host_.record_segment_event(TraceAction::segment_free, segment->base, segment->size,
                             segment->stream);
  segment->bins->remove(block);
  poison_region(poison_, segment->base, segment->size, false);
  backend_.release(as_pointer(segment->base), segment->size);
  statistics_.uncount_segment(segment->small_pool, segment->size);
  store_.forget_segment(segment);  // and its one block
}

bool FixedSegments::release_some(StreamPools& pools, std::size_t rounded) {
  if (!reclaim_.limits_splits()) return false;
  std::vector<Block*> oversize;
  pools.large.for_each(reclaim_.max_split_size(), [&oversize](Block* b) {
    if (!b->is_split() && !b->segment->expandable) oversize.push_back(b);
  });
  return reclaim_.release_oversize(oversize, rounded, [this](Block* b) { return collect(b); });
}

std::size_t FixedSegments::release_cached() {
  std::vector<Block*> whole;
  store_.for_each_pools([&whole](StreamId, const StreamPools& pools) {
    const auto gather = [&whole](Block* b) {
      if (!b->is_split() && !b->segment->expandable) whole.push_back(b);
    };
    pools.small.for_each(kSmallBuffer, gather);
    pools.large.for_each(0, gather);
  });
  std::size_t released = 0;
  for (Block* b : whole) released += collect(b);
  return released;
}

std::size_t FixedSegments::collect(Block* b) {
  const std::size_t size = b->size;
  release(b);
  return size;
}

void FixedSegments::release_at_exit(const Segment& s) noexcept {
  poison_region(poison_, s.base, s.size, false);
  backend_.release(as_pointer(s.base), s.size);
}

}  // namespace memscope::detail
