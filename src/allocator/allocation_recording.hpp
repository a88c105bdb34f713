// AllocationRecording: the allocator core's events, as blocks and segments, into its Recorder
// (recorder.hpp) behind CachingAllocator::start_recording(). Owns the Recorder: started afresh
// (the earlier log goes), stopped (the log is kept for recorder()). Whether the core must report
// at all (wants_frees()) decides the core's kHookRecord; the core calls these only then, off the
// hit path. Not synchronised (the core's caller locks); the record calls never throw.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "allocator/block.hpp"
#include "allocator/recorder.hpp"
#include "memscope/backend.hpp"
#include "memscope/recording.hpp"
#include "memscope/trace_events.hpp"

namespace memscope::detail {

class AllocationRecording {
 public:
  // Throws UsageError for max_entries 0.
  void start(const RecordingOptions& options) { recorder_ = std::make_unique<Recorder>(options); }
  void stop() noexcept {
    if (recorder_ != nullptr) recorder_->stop();
  }
  // The log, null when never started.
  [[nodiscard]] const Recorder* recorder() const noexcept { return recorder_.get(); }
  // Whether the core must report allocations and frees (active, or stacks left to forget).
  [[nodiscard]] bool wants_frees() const noexcept {
    return recorder_ != nullptr && recorder_->wants_frees();
  }

  // The calls below need a recorder (wants_frees() was true when the core's hook was set).
  // `block` handed out for `requested` bytes; its stack starts at `caller`.
  void allocated(const Block& block, std::size_t requested, std::uintptr_t caller) noexcept {
    recorder_->record_alloc(block.address, requested, block.size, block.stream(), caller);
  }
  // `block` freed by the caller; false once the recorder wants no more frees.
  [[nodiscard]] bool freed(const Block& block) noexcept {
    // Without streams to wait for, the block goes back to the cache in this very call.
    recorder_->record_free(block.address, block.requested_size, block.size, block.stream(),
                           block.stream_uses.empty());
    return recorder_->active();
  }
  // `block`'s last stream event is done (it is cached now); false as freed().
  [[nodiscard]] bool completed(const Block& block) noexcept {
    recorder_->record_completed(block.address, block.requested_size, block.size, block.stream());
    return recorder_->active();
  }
  // An event with no block or stack (a segment's, an out-of-memory, an empty_cache).
  void event(TraceAction action, std::uint64_t address, std::uint64_t size, std::uint64_t rounded,
             StreamId stream) noexcept {
    recorder_->record(action, address, size, rounded, stream);
  }

 private:
  std::unique_ptr<Recorder> recorder_;
};

}  // namespace memscope::detail
