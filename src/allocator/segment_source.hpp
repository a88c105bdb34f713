// SegmentSource: where the allocator core's miss path gets memory and gives it back, behind one
// small interface: fixed segments (fixed_segments.hpp: one reservation per segment) or
// expandable segments (expandable/expandable_segments.hpp: address ranges with pages mapped as
// they grow). Every segment of an allocator comes from one source, chosen by
// expandable_segments. The core calls it only off the hit path (a miss, a release, a garbage
// collection), so the call is virtual; the core keeps the orchestration: place, the bins, grow,
// release some and grow, release everything cached and grow (AllocatorCore::allocate_slow).
// Sources file their segments in the BlockStore and count them in AllocatorStatistics; what
// they need of the core itself goes through SourceHost. Not synchronised (the core's caller
// locks).
#pragma once

#include <cstddef>
#include <cstdint>

#include "allocator/block.hpp"
#include "allocator/block_store.hpp"
#include "memscope/trace_events.hpp"

namespace memscope::detail {

// What a segment source asks of the core that holds it.
class SourceHost {
 public:
  // Every stream's front cache into the bins (a growth about to take other streams' pages).
  virtual void flush_front_caches() noexcept = 0;
  // A segment or mapping event for the recording, when one is being made.
  virtual void record_segment_event(TraceAction action, std::uintptr_t address, std::size_t bytes,
                                    StreamId stream) noexcept = 0;

 protected:
  SourceHost() = default;
  SourceHost(const SourceHost&) = default;
  SourceHost& operator=(const SourceHost&) = default;
  ~SourceHost() = default;
};

class SegmentSource {
 public:
  SegmentSource() = default;
  SegmentSource(const SegmentSource&) = delete;
  SegmentSource& operator=(const SegmentSource&) = delete;
  virtual ~SegmentSource() = default;

  // Placement before the bins are searched, for sources that place by address space: a cached
  // block of at least `rounded` bytes out of the bins, or nullptr (the bins decide).
  [[nodiscard]] virtual Block* place(StreamPools& pools, bool small, std::size_t rounded);
  // New memory for the pool: a cached block of at least `rounded` bytes, out of the bins, or
  // nullptr when the memory (or the limit) is not there. The BlockStore is prepared for two
  // blocks and a segment. May throw BackendError.
  [[nodiscard]] virtual Block* grow(StreamPools& pools, bool small, std::size_t rounded) = 0;
  // After grow() failed, before everything cached is released: a cheaper release that may
  // make room for `rounded` bytes in `pools`; whether grow() should be tried again.
  virtual bool release_some(StreamPools& pools, std::size_t rounded);
  // Every whole free part of every segment given back (the caller flushed the front caches and
  // waited for the streams); the bytes released.
  virtual std::size_t release_cached() = 0;
  // Garbage collection: whether cached (large-pool) block `b` holds memory to give back, and
  // giving it back (the bytes released; no other cached block is touched).
  [[nodiscard]] virtual bool collectable(const Block& b) const noexcept = 0;
  virtual std::size_t collect(Block* b) = 0;
  // The allocator goes: `s`'s memory back to the backend (its blocks are the store's to delete).
  virtual void release_at_exit(const Segment& s) noexcept = 0;
};

}  // namespace memscope::detail
