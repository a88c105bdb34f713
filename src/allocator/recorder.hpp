// Recorder: the allocator's event log behind CachingAllocator::start_recording(). A ring of the
// newest events (older ones are counted as dropped) and, when asked, the stack of every
// allocation, kept raw (return addresses, the collector's Python frames) and interned, so an
// event costs a clock read and a few stores; frames are symbolized only by export_to().
//
// Not synchronised: AllocatorCore calls it under the allocator's lock. The record calls never
// throw (frees are noexcept): an event that cannot be stored for lack of memory counts as
// dropped, a stack that cannot be stored is left out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "allocator/event_clock.hpp"
#include "memscope/backend.hpp"
#include "memscope/recording.hpp"
#include "memscope/trace_events.hpp"
#include "memscope/trace_tag.hpp"

namespace memscope::detail {

class Recorder {
 public:
  // Throws UsageError for max_entries 0.
  explicit Recorder(const RecordingOptions& options);

  [[nodiscard]] const RecordingOptions& options() const noexcept { return options_; }
  // Stopped: nothing more is recorded, but the stacks of blocks still live are forgotten as
  // they are freed (so a later snapshot shows no stale stack at a reused address).
  [[nodiscard]] bool active() const noexcept { return active_; }
  void stop() noexcept {
    active_ = false;
    clock_.freeze();  // exports of the stopped log convert times identically
  }
  // Whether frees must still be reported (active, or block stacks left to forget).
  [[nodiscard]] bool wants_frees() const noexcept { return active_ || !live_stacks_.empty(); }

  // An event with no stack; size and rounded as in TraceEvent.
  void record(TraceAction action, std::uint64_t addr, std::uint64_t size, std::uint64_t rounded,
              StreamId stream) noexcept;
  // An alloc, with the caller's stack when stacks are on (remembered for the live block). The
  // C++ stack starts at the return address `caller` (the allocator's allocate()), leaving out
  // the recorder's own frames.
  void record_alloc(std::uint64_t addr, std::uint64_t size, std::uint64_t rounded, StreamId stream,
                    std::uintptr_t caller = 0) noexcept;
  // free_requested, and free_completed right after it when `completed` (no stream to wait for).
  void record_free(std::uint64_t addr, std::uint64_t size, std::uint64_t rounded, StreamId stream,
                   bool completed) noexcept;
  // free_completed of a block whose free waited for streams.
  void record_completed(std::uint64_t addr, std::uint64_t size, std::uint64_t rounded,
                        StreamId stream) noexcept;

  // Fills out.device_traces[0] with the events oldest first, out.strings with their frames,
  // stacks and tags, out.dropped_events, and the block_stacks of out.segments' live blocks.
  void export_to(TorchSnapshot& out) const;

  [[nodiscard]] std::size_t size() const noexcept { return events_.size(); }
  [[nodiscard]] std::uint64_t dropped() const noexcept { return dropped_; }

 private:
  struct RawEvent {
    std::uint64_t addr;
    std::uint64_t size;
    std::uint64_t rounded;
    std::int64_t ticks;  // EventClock::ticks()
    StreamId stream;
    TraceTag tag;
    std::uint32_t stack;  // into stacks_; 0 = none
    TraceAction action;
  };
  struct RawStack {
    std::vector<std::uintptr_t> pcs;  // C++ return addresses, innermost first
    std::vector<PythonFrame> python;  // innermost first; C++ frames are inside them
  };

  void push(const RawEvent& event) noexcept;
  // 0 when stacks are off or none were found.
  [[nodiscard]] std::uint32_t capture_stack(std::uintptr_t caller) noexcept;

  RecordingOptions options_;
  EventClock clock_;
  bool active_ = true;
  std::vector<RawEvent> events_;  // grows to max_entries, then is overwritten as a ring
  std::size_t next_ = 0;          // once full: the oldest event, overwritten next
  std::uint64_t dropped_ = 0;
  std::vector<RawStack> stacks_{RawStack{}};                  // interned; id 0 is the empty stack
  std::unordered_map<std::string, std::uint32_t> stack_ids_;  // key: the raw bytes
  std::string key_;                                           // reused for lookups
  std::unordered_map<std::uint64_t, std::uint32_t> live_stacks_;  // address -> stack
};

}  // namespace memscope::detail
