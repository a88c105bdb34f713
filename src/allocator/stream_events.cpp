#include "allocator/stream_events.hpp"

#include <algorithm>

#include "allocator/invariant.hpp"

namespace memscope::detail {

void StreamEvents::add_use(Block& block, StreamId stream) {
  if (stream == block.stream()) return;  // its own stream orders the reuse already
  if (std::find(block.stream_uses.begin(), block.stream_uses.end(), stream) ==
      block.stream_uses.end()) {
    block.stream_uses.push_back(stream);
    block.mark_slow_free(Block::kOtherStreams);
  }
}

void StreamEvents::record_frees(Block& block) noexcept {
  if (block.stream_uses.empty()) return;
  try {
    for (const StreamId s : block.stream_uses) {
      const EventId e = acquire_event();
      pending_.push_back({e, s, &block});  // capacity grows before the event is recorded
      ++block.pending_events;
      backend_.record_event(e, s);
    }
  } catch (...) {
    // The device could not record the event: the stream may still use the block, so it is
    // never reused (it stays pending, visible in snapshots) rather than risk corruption.
    ++block.pending_events;
  }
  block.stream_uses.clear();
  block.unmark_slow_free(Block::kOtherStreams);
}

EventId StreamEvents::acquire_event() {
  if (!spare_events_.empty()) {
    const EventId e = spare_events_.back();
    spare_events_.pop_back();
    return e;
  }
  // Keep room to take every event back without allocating (process() is noexcept).
  spare_events_.reserve(pending_.size() + spare_events_.size() + 1);
  return backend_.create_event();
}

void StreamEvents::destroy_spares() noexcept {
  for (const EventId e : spare_events_) backend_.destroy_event(e);
  spare_events_.clear();
}

void StreamEvents::check(const std::vector<const Block*>& blocks) const {
  for (const PendingEvent& pe : pending_) {
    if (!std::binary_search(blocks.begin(), blocks.end(), pe.block) || pe.block->use.allocated ||
        pe.block->cached || pe.block->pending_events == 0) {
      broken_invariant("pending",
                       "a stream event waits for " + describe(pe.block) + ", which is not pending");
    }
  }
}

}  // namespace memscope::detail
