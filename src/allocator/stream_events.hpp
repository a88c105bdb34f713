// StreamEvents: the blocks freed while other streams may still use them (record_stream), and
// the backend events they wait for. A value member of AllocatorCore, off the hot path: a block
// with stream uses is freed by the slow path, which asks record_frees() to record one event per
// stream; process() and synchronize() hand each block whose last event is done back to the
// caller, which caches it. Owns the pending events and the spare EventIds, and their invariant
// ("pending": every pending event refers to a pending block). Not synchronised (the core's
// caller locks).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <vector>

#include "allocator/block.hpp"
#include "memscope/backend.hpp"

namespace memscope::detail {

class StreamEvents {
 public:
  explicit StreamEvents(Backend& backend) noexcept : backend_(backend) {}
  StreamEvents(const StreamEvents&) = delete;
  StreamEvents& operator=(const StreamEvents&) = delete;
  ~StreamEvents() = default;

  // Whether any event is pending.
  [[nodiscard]] bool any_pending() const noexcept { return !pending_.empty(); }

  // record_stream(): `stream` used `block` (allocated) besides its own stream; its free then
  // takes the slow path. May throw std::bad_alloc.
  static void add_use(Block& block, StreamId stream);

  // The free of `block` (allocated, statistics already uncounted): one event recorded on each
  // stream it was used on, counted in its pending_events, and its stream uses cleared. When the
  // device cannot record an event the block stays pending for good (never reused: the stream
  // may still use it).
  void record_frees(Block& block) noexcept;

  // The blocks whose events are all done, each passed to done(Block*) as its last event
  // completes: process() asks the backend without waiting (events of one stream complete in
  // order, so a stream's later events are skipped after its first that is not done);
  // synchronize() waits for every event.
  template <class Done>
  void process(Done&& done) noexcept;
  template <class Done>
  void synchronize(Done&& done) noexcept;

  // The spare EventIds back to the backend (the core's destructor, after synchronize()).
  void destroy_spares() noexcept;

  // The "pending" invariant: every pending event refers to a pending block among `blocks`
  // (every block of every live segment, sorted). Throws InternalError.
  void check(const std::vector<const Block*>& blocks) const;

 private:
  struct PendingEvent {
    EventId event;
    StreamId stream{};
    Block* block;
  };
  [[nodiscard]] EventId acquire_event();
  // One of a block's events is done (its EventId goes back to the spares): true after its last.
  [[nodiscard]] bool event_done(const PendingEvent& pe) noexcept {
    spare_events_.push_back(pe.event);  // cannot fail: acquire_event() kept room
    return --pe.block->pending_events == 0;
  }

  Backend& backend_;
  std::vector<PendingEvent> pending_;
  std::vector<EventId> spare_events_;
};

template <class Done>
void StreamEvents::process(Done&& done) noexcept {
  // Events on one stream complete in order: after the first one that is not done, skip the
  // stream's later events without asking the backend.
  std::array<StreamId, 8> blocked{};
  std::size_t n_blocked = 0;
  std::size_t kept = 0;
  for (const PendingEvent& pe : pending_) {
    const bool stream_blocked =
        std::find(blocked.begin(), blocked.begin() + static_cast<std::ptrdiff_t>(n_blocked),
                  pe.stream) != blocked.begin() + static_cast<std::ptrdiff_t>(n_blocked);
    bool is_done = false;
    if (!stream_blocked) {
      try {
        is_done = backend_.query_event(pe.event);
      } catch (...) {
        is_done = false;
      }
    }
    if (!is_done) {
      if (!stream_blocked && n_blocked < blocked.size()) blocked[n_blocked++] = pe.stream;
      pending_[kept++] = pe;
      continue;
    }
    if (event_done(pe)) done(pe.block);
  }
  pending_.resize(kept);
}

template <class Done>
void StreamEvents::synchronize(Done&& done) noexcept {
  for (const PendingEvent& pe : pending_) {
    try {
      backend_.synchronize_event(pe.event);
    } catch (...) {
      // A failing device cannot be waited on; the block is handed back as the device is gone.
    }
    if (event_done(pe)) done(pe.block);
  }
  pending_.clear();
}

}  // namespace memscope::detail
