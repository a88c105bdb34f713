// AllocatorCore: the caching algorithm and its statistics, with no locking and no knowledge of
// threads, so it can be tested and reasoned about on its own. CachingAllocator wraps it with a
// mutex and the public API. It talks to memory only through its Backend.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <unordered_map>
#include <vector>

#include "allocator/allocation_hooks.hpp"
#include "allocator/allocator_statistics.hpp"
#include "allocator/block.hpp"
#include "allocator/block_store.hpp"
#include "allocator/expandable/expandable_segments.hpp"
#include "allocator/fixed_segments.hpp"
#include "allocator/free_bins.hpp"
#include "allocator/front_cache.hpp"
#include "allocator/hot_path_gate.hpp"
#include "allocator/pointer_map.hpp"
#include "allocator/reclaim.hpp"
#include "allocator/recycler.hpp"
#include "allocator/size_rules.hpp"
#include "allocator/stream_events.hpp"
#include "memscope/backend.hpp"
#include "memscope/config.hpp"
#include "memscope/errors.hpp"
#include "memscope/peak_scope.hpp"
#include "memscope/snapshot.hpp"
#include "memscope/stats.hpp"

namespace memscope {

class AllocatorCore {
 public:
  AllocatorCore(Backend& backend, const AllocatorConfig& config);
  AllocatorCore(const AllocatorCore&) = delete;
  AllocatorCore& operator=(const AllocatorCore&) = delete;
  ~AllocatorCore() noexcept;

  // A block for `size` bytes (size >= 1), or nullptr when even a flush and retry failed; then
  // oom_figures() holds the figures for the error message. May throw BackendError.
  [[nodiscard]] void* allocate(std::size_t size, StreamId stream);
  // allocate() in two parts: reuse() is its hot path (a front-cache hit; nullptr otherwise, with
  // nothing changed), allocate_slow() the rest, which the same block may still satisfy.
  [[nodiscard]] void* reuse(std::size_t size, StreamId stream) noexcept;
  [[gnu::noinline]] [[nodiscard]] void* allocate_slow(std::size_t size, StreamId stream);
  // The figures for the message of the last allocate() that returned nullptr.
  [[nodiscard]] const OutOfMemoryError::Figures& oom_figures() const noexcept { return oom_; }
  // False when `ptr` is not a live allocation.
  [[nodiscard]] bool deallocate(void* ptr) noexcept;
  // deallocate()'s hot path alone: true when `ptr` was live and went into its stream's front
  // cache; false (nothing changed) for every other case, which deallocate() then handles.
  [[nodiscard]] bool free_to_front_cache(void* ptr) noexcept;
  void record_stream(void* ptr, StreamId stream);
  [[nodiscard]] const detail::Block* find(const void* ptr) const noexcept {
    return store_.allocated_at(ptr);
  }
  std::size_t empty_cache();

  // Moves every block of the front cache (RecentFrees) of every stream into the bins, merging
  // it: before any search of the bins and any release of cached memory, and before stats() and
  // snapshot() are read, which then say what merging at each free would have made them.
  void flush_recent() noexcept;
  [[nodiscard]] bool has_recent() const noexcept { return detail::FrontCache::any(store_); }
  // The statistics, read-only: live allocations, peak windows and counters.
  [[nodiscard]] const detail::AllocatorStatistics& statistics() const noexcept {
    return statistics_;
  }
  // Exact for the blocks as they are; inactive_split counts a front-cached block only once it is
  // merged (flush_recent() first for the figures PyTorch's rules give).
  [[nodiscard]] MemoryStats stats() const noexcept { return statistics_.report(); }
  void reset_peak_stats() noexcept { statistics_.reset_peaks(); }
  void reset_accumulated_stats() noexcept { statistics_.reset_accumulated(); }
  void count_invalid_free() noexcept { statistics_.count_invalid_free(); }
  [[nodiscard]] Snapshot snapshot() const;
  // Checks every invariant of the bookkeeping (docs/design.md lists the families), each with
  // the component that owns it. Throws InternalError naming the broken invariant and the block
  // or segment. O(n log n) in the blocks: for tests and debug builds, never on the hot path.
  void validate() const;
  // The gate reuse() and file_if_hot() test (HotPathGate), and what it must be.
  [[nodiscard]] unsigned off_hot_path() const noexcept { return off_hot_path_; }
  [[nodiscard]] unsigned off_hot_path_now() const noexcept;  // what off_hot_path() must be

  // Peak windows and recording (AllocationHooks), here so that the HotPathGate follows them.
  void open_window(PeakScope::Windows::Window& window) noexcept {
    hooks_.open_window(window);
    update_off_hot_path();
  }
  void close_window(PeakScope::Windows::Window& window) noexcept {
    hooks_.close_window(window);
    update_off_hot_path();
  }
  void start_recording(const RecordingOptions& options) {
    hooks_.start_recording(options);
    update_off_hot_path();
  }
  void stop_recording() noexcept {
    hooks_.stop_recording();
    update_off_hot_path();
  }
  [[nodiscard]] const detail::Recorder* recorder() const noexcept { return hooks_.recorder(); }

  void add_free_memory_callback(std::function<bool()> callback) {
    reclaim_.add_free_memory_callback(std::move(callback));
  }
  // The components, read-only: what tests and diagnostics look at through the components' own
  // interfaces (the pools of each stream, the page donors, the blocks by address; page
  // recycling's search count).
  [[nodiscard]] const detail::BlockStore& block_store() const noexcept { return store_; }
  [[nodiscard]] const detail::ExpandableSegments& expandable_segments() const noexcept {
    return expandable_;
  }
  // Walks over every stream's pools so far (flush_recent(), release_all_cached()): what tests
  // count to see a refusal skip them.
  [[nodiscard]] std::uint64_t stream_walks() const noexcept { return stream_walks_; }
  [[nodiscard]] std::size_t memory_limit() const noexcept { return memory_limit_; }
  void set_memory_limit(std::size_t bytes) noexcept { memory_limit_ = bytes; }

 private:
  using StreamPools = detail::StreamPools;
  void hand_out(detail::Block* block, std::size_t rounded, std::size_t requested);
  // The part of hand_out() a recent block needs: allocated, with its statistics.
  [[gnu::always_inline]] inline void count_allocation(detail::Block* block,
                                                      std::size_t requested) noexcept;
  // count_allocation() when no block waits (so active's peak is allocation's).
  [[gnu::always_inline]] inline void count_allocation_while_none_waits(
      detail::Block* block, std::size_t requested) noexcept;
  void cache_block(detail::Block* block) noexcept;  // active -> cached, merging neighbours
  // Inactive (recent, or active after its statistics were counted) -> cached: merges it with
  // cached neighbours into the bins, counting only inactive_split.
  void merge_into_bins(detail::Block* block) noexcept;
  [[gnu::noinline]] void deallocate_slow(detail::Block* block) noexcept;
  // The free of an allocated block no other stream used into its front cache, when that is all
  // it takes: true; else false with nothing changed.
  [[gnu::always_inline]] inline bool file_if_hot(detail::Block* block) noexcept;
  // A recent block handed out again: allocated, counted, hooks run; its address.
  [[gnu::always_inline]] inline void* reuse_recent(detail::Block* block, std::size_t size) noexcept;
  // active -> not: the requested statistics of a block leaving use (active's are derived).
  [[gnu::always_inline]] inline void uncount_active(const detail::Block* block) noexcept;
  // allocated -> not: the statistics of the allocation (active ones change when it is cached).
  [[gnu::always_inline]] inline void uncount_allocation(detail::Block* block) noexcept;
  // Active -> recent into `recent`, which has room: the statistics of the free.
  [[gnu::always_inline]] inline void file_recent(detail::Block* block,
                                                 detail::RecentFrees& recent) noexcept;
  // Freed without stream uses: active -> recent (the front cache), evicting the oldest recent
  // block of its stream into the bins when the list is full.
  void keep_recent(detail::Block* block) noexcept;
  // A recent block out of the front cache (already out of its list) and merged into its bins.
  void flush_recent_block(detail::Block* block) noexcept;
  // What the front cache's flushes pass each block to: flush_recent_block().
  [[nodiscard]] auto merge_recent() noexcept {
    return [this](detail::Block* b) { flush_recent_block(b); };
  }
  // The miss path's memory from the segment source: grow, else release some and grow again,
  // else release everything cached and grow once more; nullptr when even that failed.
  [[nodiscard]] detail::Block* grow(StreamPools& pools, bool small, std::size_t rounded);

  // Garbage collection and release at the limit: the candidates, released as reclaim_ says.
  void garbage_collect();
  // Waits for every stream, releases every cached whole segment (and unmaps the free pages of
  // expandable ones), then drops the pools of streams left without segments but last_pools().
  std::size_t release_all_cached();
  // The blocks whose streams' events are done are cached: those done now (process_events),
  // or all after waiting for every stream (synchronize_events).
  void process_events() noexcept;
  void synchronize_events() noexcept;
  // A waiting block's last event is done: it stops waiting and is cached.
  void stop_waiting(detail::Block* block) noexcept;
  using Gate = detail::HotPathGate;
  // At capacity, fixed segments: the front cache is bypassed (FrontCache::bypass says why).
  void enter_tight() noexcept;
  void update_off_hot_path() noexcept { off_hot_path_ = off_hot_path_now(); }
  // poison_freed: cached blocks of host memory are poisoned for AddressSanitizer (on) and
  // unpoisoned when handed out or released (off); no-ops in builds without ASan, without the
  // setting, and for backends whose memory the CPU cannot address.
  void poison(std::uintptr_t address, std::size_t size, bool on = true) const noexcept;

  Backend& backend_;
  AllocatorConfig config_;
  const detail::PlacementRules rules_;  // how blocks are rounded, placed and split
  bool poison_;  // poison_freed is set, the build has ASan and the backend's memory is host
  std::size_t memory_limit_;
  detail::AllocatorStatistics statistics_;  // the figures stats() reports, and peak windows
  // Walks over every stream made (stream_walks()). FrontCache::flush_all() and
  // Reclaim::release_finds_nothing() skip them while nothing they look for can have appeared
  // (issue 44): at the limit every refused allocation made both, over streams that had freed
  // nothing (an RMM log of 60,000 streams took 35 s to replay; bench/oom_replay.cpp).
  std::uint64_t stream_walks_ = 0;
  detail::FrontCache front_cache_;              // the per-stream recent blocks' rules
  OutOfMemoryError::Figures oom_;               // see oom_figures()
  unsigned off_hot_path_ = 0;                   // the HotPathGate (update_off_hot_path() keeps it)
  detail::AllocationHooks hooks_{statistics_};  // windows and recording: what else each call does
  // The allocator's clock, which ages cached blocks for gc: allocations made so far.
  [[nodiscard]] std::uint64_t clock() const noexcept { return statistics_.clock(); }
  detail::BlockStore store_;     // segments, blocks, the pointer map, each stream's pools
  detail::StreamEvents events_;  // blocks freed while other streams may use them
  detail::Reclaim reclaim_;      // what the miss path gives back, and when
  // What the segment sources ask of the core: flushing front caches, recording.
  class Host final : public detail::SourceHost {
   public:
    explicit Host(AllocatorCore& core) noexcept : core_(core) {}
    void flush_front_caches() noexcept override { core_.flush_recent(); }
    void record_segment_event(TraceAction action, std::uintptr_t address, std::size_t bytes,
                              StreamId stream) noexcept override {
      core_.hooks_.event(action, address, bytes, bytes, stream);
    }

   private:
    AllocatorCore& core_;
  };
  Host host_{*this};
  // The segment sources; source_ is the one expandable_segments chooses.
  detail::FixedSegments fixed_;
  detail::ExpandableSegments expandable_;
  detail::SegmentSource* source_;
};

}  // namespace memscope

// The hot path's inline definitions (allocate, deallocate and what they call).
#include "allocator/core_hot_path.hpp"  // IWYU pragma: export
