// AllocatorCore::snapshot(): the segment and block lists as plain values.
#include <algorithm>

#include "allocator/allocator_core.hpp"

namespace memscope {
namespace {

void add_block(SegmentInfo& info, const detail::Block& b) {
  BlockInfo block{b.address, b.size, b.requested_size, BlockState::inactive};
  if (b.use.allocated) {
    block.state = BlockState::active_allocated;
    info.allocated_size += b.size;
  } else if (b.pending_events > 0) {
    block.state = BlockState::active_pending_free;
  }
  if (block.state != BlockState::inactive) {
    info.active_size += b.size;
    info.requested_size += b.requested_size;
  }
  info.blocks.push_back(block);
}

}  // namespace

Snapshot AllocatorCore::snapshot() const {
  Snapshot snap = layout();
  snap.backend = backend_.name();
  snap.settings = config_.to_string();
  return snap;
}

Snapshot AllocatorCore::layout() const {
  Snapshot snap;
  for (const detail::Segment* s = segments_; s != nullptr; s = s->next) {
    // An expandable segment shows as one segment per contiguous mapped run of its blocks.
    for (const detail::Block* b = s->first; b != nullptr;) {
      if (b->unmapped) {
        b = b->next;
        continue;
      }
      SegmentInfo info;
      info.address = b->address;
      info.stream = s->stream;
      info.small_pool = s->small_pool;
      info.is_expandable = s->expandable;
      for (; b != nullptr && !b->unmapped; b = b->next) add_block(info, *b);
      info.total_size = info.blocks.back().address + info.blocks.back().size - info.address;
      snap.segments.push_back(std::move(info));
    }
  }
  std::sort(snap.segments.begin(), snap.segments.end(),
            [](const SegmentInfo& a, const SegmentInfo& b) { return a.address < b.address; });
  return snap;
}

}  // namespace memscope
