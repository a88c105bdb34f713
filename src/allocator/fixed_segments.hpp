// FixedSegments: the segment source of expandable_segments:false, PyTorch's default. Each miss
// that the bins cannot serve reserves one segment from the backend, sized by the size rules
// (size_rules.hpp); a segment goes back whole, once all of it is cached: at the limit (the
// oversize ones first, as Reclaim picks them), at empty_cache(), or by garbage collection. Not
// synchronised (the core's caller locks).
#pragma once

#include <cstddef>

#include "allocator/allocator_statistics.hpp"
#include "allocator/block_store.hpp"
#include "allocator/reclaim.hpp"
#include "allocator/segment_source.hpp"
#include "memscope/backend.hpp"

namespace memscope::detail {

class FixedSegments final : public SegmentSource {
 public:
  // `memory_limit` is the core's, read at each reservation (set_memory_limit() may change it).
  FixedSegments(Backend& backend, BlockStore& store, AllocatorStatistics& statistics,
                const Reclaim& reclaim, SourceHost& host, const std::size_t& memory_limit,
                bool poison) noexcept
      : backend_(backend),
        store_(store),
        statistics_(statistics),
        reclaim_(reclaim),
        host_(host),
        memory_limit_(memory_limit),
        poison_(poison) {}

  // A new segment for `rounded` bytes (segment_size()), covered by one cached block out of
  // the bins; nullptr when the limit or the backend refuses it.
  [[nodiscard]] Block* grow(StreamPools& pools, bool small, std::size_t rounded) override;
  // Oversize cached segments of the pool's large bins, as Reclaim picks them.
  bool release_some(StreamPools& pools, std::size_t rounded) override;
  // Every cached whole segment of every stream.
  std::size_t release_cached() override;
  [[nodiscard]] bool collectable(const Block& b) const noexcept override { return !b.is_split(); }
  std::size_t collect(Block* b) override;
  void release_at_exit(const Segment& s) noexcept override;

 private:
  // `size` bytes as a new segment of `pools`; nullptr when the limit or the backend refuses.
  [[nodiscard]] Block* reserve(std::size_t size, StreamPools& pools, bool small);
  // The segment of cached block `block`, which covers it whole, back to the backend.
  void release(Block* block) noexcept;

  Backend& backend_;
  BlockStore& store_;
  AllocatorStatistics& statistics_;
  const Reclaim& reclaim_;
  SourceHost& host_;
  const std::size_t& memory_limit_;
  bool poison_;
};

}  // namespace memscope::detail
