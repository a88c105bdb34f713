// Snapshot: the allocator's segments and their blocks at one moment, in the shape of
// torch.cuda.memory_snapshot() so the same tools can read both.
//
// A plain value: copy it, keep it, export it. totals() rebuilds the current statistics from the
// blocks alone; the allocator's test suite checks that it always equals the live statistics.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "memscope/backend.hpp"
#include "memscope/stats.hpp"

namespace memscope {

enum class BlockState {
  active_allocated,     // handed out and not freed
  active_pending_free,  // freed, waiting for streams recorded with record_stream()
  inactive,             // free and reusable
};

[[nodiscard]] const char* to_string(BlockState state) noexcept;

struct BlockInfo {
  std::uintptr_t address = 0;
  std::size_t size = 0;            // rounded size the block occupies
  std::size_t requested_size = 0;  // what the caller asked for (0 when inactive)
  BlockState state = BlockState::inactive;
};

struct SegmentInfo {
  std::uintptr_t address = 0;
  std::size_t total_size = 0;
  std::size_t allocated_size = 0;  // bytes of active_allocated blocks
  std::size_t active_size = 0;     // bytes of active blocks (allocated or pending free)
  std::size_t requested_size = 0;  // requested bytes of active blocks
  StreamId stream = kDefaultStream;
  bool small_pool = false;  // segment_type "small" (blocks <= 1 MiB) or "large"
  // One contiguous mapped range of an expandable segment (expandable_segments:true): a stream
  // and pool's growable segment shows as one such segment per mapped range.
  bool is_expandable = false;
  std::vector<BlockInfo> blocks;  // in address order, covering the segment exactly
};

struct Snapshot {
  std::string backend;                // the backend's spec, e.g. "sim:24GiB"
  std::string settings;               // AllocatorConfig::to_string() of the allocator
  std::vector<SegmentInfo> segments;  // in address order

  // The "current" value of every byte and count family, per pool, rebuilt from the blocks.
  // Only `current` is meaningful in the result (peaks and totals need history).
  [[nodiscard]] MemoryStats totals() const;
  // JSON with torch's snapshot key names ("segments", "total_size", "blocks", "state"...).
  // indent < 0 gives one line.
  [[nodiscard]] std::string to_json(int indent = 2) const;
};

}  // namespace memscope
