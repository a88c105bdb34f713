// AllocationHooks: what the allocator core does beyond caching while peak windows are open or
// recording is on: each allocation observed by the windows (AllocatorStatistics) and each
// allocation, free and completion reported to the recording (AllocationRecording, which it
// owns). bits() says which (HotPathGate's hook bits): the core tests it off the hit path and
// calls after_allocate(), record_free() and record_completed() only when a bit is set; every
// call that may change bits() says so, and the core then updates its HotPathGate.
// Not synchronised (the core's caller locks); only start_recording() throws.
#pragma once

#include <cstddef>
#include <cstdint>

#include "allocator/allocation_recording.hpp"
#include "allocator/allocator_statistics.hpp"
#include "allocator/block.hpp"
#include "allocator/hot_path_gate.hpp"
#include "allocator/recorder.hpp"
#include "memscope/backend.hpp"
#include "memscope/peak_scope.hpp"
#include "memscope/recording.hpp"
#include "memscope/trace_events.hpp"

namespace memscope::detail {

class AllocationHooks {
 public:
  // `statistics` holds the peak windows and outlives this.
  explicit AllocationHooks(AllocatorStatistics& statistics) noexcept : statistics_(statistics) {}

  // HotPathGate::Hook bits: kHookWindows while a window is open, kHookRecord while the
  // recording wants frees (active, or stacks left to forget).
  [[nodiscard]] unsigned bits() const noexcept { return bits_; }
  [[nodiscard]] bool recording_events() const noexcept {
    return (bits_ & HotPathGate::kHookRecord) != 0;
  }
  // The recording's log, null when never started.
  [[nodiscard]] const Recorder* recorder() const noexcept { return recording_.recorder(); }

  // Each changes bits(). start_recording() starts afresh (the earlier log goes; UsageError for
  // max_entries 0); stop_recording() keeps the log for recorder().
  void open_window(PeakScope::Windows::Window& window) noexcept;
  void close_window(PeakScope::Windows::Window& window) noexcept;
  void start_recording(const RecordingOptions& options);
  void stop_recording() noexcept;

  // Cold and never inlined: inlined, the compiler hoists their loads above the core's test of
  // bits() (and after_allocate's return address is where recorded C++ stacks start).
  // `block` handed out for `requested` bytes, with bits() not 0.
  [[gnu::cold, gnu::noinline]] void after_allocate(const Block& block,
                                                   std::size_t requested) noexcept;
  // `block` freed by the caller / its last stream event done, while recording_events(): true
  // when bits() was derived again (the recording stopped wanting frees: the last stack forgotten).
  [[gnu::cold, gnu::noinline]] [[nodiscard]] bool record_free(const Block& block) noexcept;
  [[gnu::cold, gnu::noinline]] [[nodiscard]] bool record_completed(const Block& block) noexcept;
  // An event with no block or stack (a segment's, an out-of-memory, an empty_cache), recorded
  // while recording_events().
  void event(TraceAction action, std::uint64_t address, std::uint64_t size, std::uint64_t rounded,
             StreamId stream) noexcept {
    if (recording_events()) recording_.event(action, address, size, rounded, stream);
  }

 private:
  // bits() from the windows and the recording.
  void update() noexcept;

  AllocatorStatistics& statistics_;
  AllocationRecording recording_;  // the events into its Recorder
  unsigned bits_ = 0;
};

}  // namespace memscope::detail
