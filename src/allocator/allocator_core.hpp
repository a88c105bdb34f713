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

#include "allocator/block.hpp"
#include "allocator/free_bins.hpp"
#include "allocator/pointer_map.hpp"
#include "allocator/recorder.hpp"
#include "allocator/recycler.hpp"
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
  [[nodiscard]] const detail::Block* find(const void* ptr) const noexcept;
  [[nodiscard]] std::size_t live_allocations() const noexcept {
    return static_cast<std::size_t>(
        stats_.allocation[static_cast<std::size_t>(StatPool::all)].current);
  }
  std::size_t empty_cache();

  // Moves every block of the front cache (RecentFrees) of every stream into the bins, merging
  // it: before any search of the bins and any release of cached memory, and before stats() and
  // snapshot() are read, which then say what merging at each free would have made them.
  void flush_recent() noexcept;
  [[nodiscard]] bool has_recent() const noexcept;
  // Exact for the blocks as they are; inactive_split counts a front-cached block only once it is
  // merged (flush_recent() first for the figures PyTorch's rules give).
  [[nodiscard]] MemoryStats stats() const noexcept;
  void reset_peak_stats() noexcept;
  void reset_accumulated_stats() noexcept;
  void count_invalid_free() noexcept { ++stats_.num_invalid_frees; }
  [[nodiscard]] Snapshot snapshot() const;
  // Checks every invariant of the bookkeeping (listed in core_validate.cpp): segments tiled
  // exactly by their blocks, free bins holding exactly the cached blocks, the pointer map
  // exactly the allocated ones, statistics equal to what the blocks say. Throws InternalError
  // naming the broken invariant and the block or segment. O(n log n) in the blocks: for tests
  // and debug builds, never on the hot path of a release build.
  void validate() const;

  [[nodiscard]] const PeakScope::Windows& peak_windows() const noexcept { return windows_; }
  // Peak windows are opened and closed here so the hot path's one test (hooks_) stays true.
  void open_window(PeakScope::Windows::Window& window) noexcept;
  void close_window(PeakScope::Windows::Window& window) noexcept;

  // Recording (recorder.hpp): start afresh (UsageError for max_entries 0), stop (the log is
  // kept for recorder()), and the log, null when never started.
  void start_recording(const RecordingOptions& options);
  void stop_recording() noexcept;
  [[nodiscard]] const detail::Recorder* recorder() const noexcept { return recorder_.get(); }
  [[nodiscard]] PeakScope::Windows::Values peak_counters() const noexcept;

  void add_free_memory_callback(std::function<bool()> callback) {
    free_memory_callbacks_.push_back(std::move(callback));
  }
  [[nodiscard]] std::size_t memory_limit() const noexcept { return memory_limit_; }
  void set_memory_limit(std::size_t bytes) noexcept { memory_limit_ = bytes; }

 private:
  // A stream's pools live while a segment of the stream does (segments point at their bins);
  // empty_cache() drops the others, so a stream used once costs nothing once it is emptied.
  struct StreamPools {
    StreamId stream{};
    detail::FreeBins small{true};
    detail::FreeBins large{false};
    detail::RecentFrees recent;  // of both pools: a block's size says which
    std::size_t segments = 0;    // live segments of this stream (both pools)
    // expandable_segments: the stream's growable segment of each pool, once it has one.
    detail::Segment* expandable_small = nullptr;
    detail::Segment* expandable_large = nullptr;
  };
  struct PendingEvent {
    EventId event;
    StreamId stream{};
    detail::Block* block;
  };

  [[nodiscard]] StreamPools& pools_for(StreamId stream);   // inline: the last used, or ...
  [[nodiscard]] StreamPools& find_pools(StreamId stream);  // ... found or made
  // Drops the pools of every stream without segments, except `keep` (a caller may hold it).
  void drop_unused_pools(const StreamPools* keep) noexcept;
  // The same for one stream's pools, found by its id: no walk over the others.
  void drop_pools_if_unused(StreamId stream, const StreamPools* keep) noexcept;
  [[nodiscard]] detail::FreeBins& bins_of(const detail::Block& block);
  [[gnu::always_inline]] [[nodiscard]] detail::Block* take_cached(detail::FreeBins& bins,
                                                                  std::size_t rounded) noexcept;
  // Out of line: only expandable segments call it, and the hit path stays small.
  [[gnu::noinline]] [[nodiscard]] detail::Block* best_fit_sparing_tails(
      detail::FreeBins& bins, detail::Block* tail, std::size_t rounded) const noexcept;
  [[nodiscard]] detail::Block* reserve_segment(std::size_t size, StreamPools& pools, bool small);
  // Files a new segment at `base` under `pools`, covered by one fresh block (the recyclers hold
  // one of each: allocate() prepared them).
  detail::Segment* add_segment(StreamPools& pools, bool small, void* base,
                               std::size_t size) noexcept;
  void hand_out(detail::Block* block, std::size_t rounded, std::size_t requested);
  // The part of hand_out() a recent block needs: allocated, with its statistics.
  [[gnu::always_inline]] inline void count_allocation(detail::Block* block,
                                                      std::size_t requested) noexcept;
  // count_allocation() when no block waits (so active's peak is allocation's: see waiting_).
  [[gnu::always_inline]] inline void count_allocation_while_none_waits(
      detail::Block* block, std::size_t requested) noexcept;
  // An allocation while blocks wait: active may pass allocation's peak (see waiting_).
  [[gnu::cold, gnu::noinline]] void note_active_peaks(bool small) noexcept;
  // Calls f(Stat&) on every Stat the core keeps: stats_ (families, single ones) and waiting_*.
  template <class F>
  void for_each_kept_stat(F&& f);
  void cache_block(detail::Block* block) noexcept;  // active -> cached, merging neighbours
  // Inactive (recent, or active after its statistics were counted) -> cached: merges it with
  // cached neighbours into the bins, counting only inactive_split.
  void merge_into_bins(detail::Block* block) noexcept;
  // `high`, the neighbour just above `low` in their segment, becomes part of `low` and is
  // recycled; both are out of the bins (or both unmapped). Returns `low`.
  detail::Block* join_blocks(detail::Block* low, detail::Block* high) noexcept;
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
  // Whether `block`, front-cached, may serve the next allocation of its size where best fit
  // would put it. Asked at the free with expandable segments, and by allocate_slow() before a
  // hit with both kinds (the hot path cannot ask). Merged at free, then found by best fit, it would
  // go back to the same address when no free or recent block lies below it (the merge would start
  // lower) and either an active block or the segment's end follows it (merging changes nothing, and
  // best fit takes the lowest of equal blocks) or the pool's bins would hold the merged block alone
  // (a free block or unmapped space after it: best fit finds it, tail or not). Refusing the
  // rest keeps placement PyTorch's on the corpus: taking every such block back made the 3-D
  // cellular automaton reserve 1.2982 instead of 1.1579 of its live peak.
  [[nodiscard]] static bool keeps_placement(const detail::Block* block) noexcept;
  // Fixed segments: whether a freed block marked kNextCached or kPrevCached may still enter the
  // front cache, that is whether best fit, merging it with its cached neighbours, would place the
  // next allocation of its size where a hit would (never with a cached previous neighbour);
  // clears the marks when the reasons are gone.
  [[nodiscard]] static bool front_cache_keeps_placement(detail::Block* block) noexcept;
  // Into its segment's bins (a fixed segment's after the split or merge), marking the blocks
  // whose next neighbour is then cached beside another cached block kNextCached, and the block
  // after it kPrevCached.
  static void cache_in_bins(detail::Block* block) noexcept;
  // The newest recent block, taken out of the list, when it is of exactly `rounded` bytes; else
  // nullptr. The list must not be empty.
  [[nodiscard]] static detail::Block* take_newest_recent(detail::RecentFrees& recent,
                                                         std::size_t rounded) noexcept;
  void flush_recent_block(detail::Block* block) noexcept;
  // One stream's front cache into its bins (flush_recent() does every stream's).
  void flush_recent_of(detail::RecentFrees& recent) noexcept;
  // Only those of `recent` that `bins` would hold, in the order they were freed; the others stay.
  void flush_recent_into(detail::RecentFrees& recent, const detail::FreeBins& bins) noexcept;
  void release_segment(detail::Block* block) noexcept;
  // The miss path with fixed segments: a new segment, else oversize cached ones released, else
  // everything cached released; nullptr when even that failed.
  [[nodiscard]] detail::Block* allocate_segment(StreamPools& pools, bool small,
                                                std::size_t rounded);
  // validate()'s check of page_donors_ against every stream's bins (core_validate.cpp).
  void check_page_donors() const;

  // --- Expandable segments (expandable.cpp) ---------------------------------------------------
  // The miss path with expandable segments: grow the stream's segment (recycling pages as the
  // policy says), else unmap everything cached and grow again; nullptr when that failed.
  [[nodiscard]] detail::Block* allocate_expandable(StreamPools& pools, bool small,
                                                   std::size_t rounded);
  // A cached block of at least `rounded` bytes at the lowest address of the pool's segment
  // where cached and unmapped space together fit it, taken out of the bins; nullptr when the
  // memory (or the address range) is not there.
  [[nodiscard]] detail::Block* grow(StreamPools& pools, bool small, std::size_t rounded);
  // grow() on a given run of `s`: from `start` to `last`, cached and unmapped blocks that
  // together hold `rounded` bytes.
  [[nodiscard]] detail::Block* grow_run(detail::Segment* s, detail::Block* start,
                                        detail::Block* last, std::size_t rounded);
  // Placement by address space (recycling above_peak and always): best fit among the
  // runs of free address space (cached and unmapped blocks together), whatever is mapped,
  // the run at the end of the growing range last; maps what the run lacks. nullptr when no
  // run fits or the memory is not there (the caller falls back to grow()).
  [[nodiscard]] detail::Block* place_by_address(StreamPools& pools, bool small,
                                                std::size_t rounded);
  // Splits cached block `b`, out of its bins, so that its last `rounded` bytes are the block
  // returned (its front goes back to the bins): place_by_address()'s choice when the rest of the
  // run keeps more whole pages that way. block_recycler_ must be prepared for one block.
  [[nodiscard]] detail::Block* split_off_back(detail::Block* b, std::size_t rounded);
  // place_by_address()'s choice at the end of a free run of `run_bytes` from `start` (cached and
  // unmapped blocks): the last `rounded` bytes, mapped or moved in where unmapped; the run's
  // front stays free. nullptr when the memory is not there.
  [[nodiscard]] detail::Block* place_at_back(detail::Block* start, std::size_t run_bytes,
                                             std::size_t rounded);
  // Splits `b` at `at`, inside it: `b` keeps [b->address, at), and the block returned, new and
  // linked after it, holds the rest; what either is (cached, unmapped) is the caller's to set.
  // block_recycler_ must be prepared for one block.
  [[nodiscard]] detail::Block* split_block_at(detail::Block* b, std::uintptr_t at) noexcept;
  // Splits unmapped block `u` at page boundary `at` (inside it) and returns the upper part, also
  // unmapped, listed after `u`; join_unmapped() undoes it while neither part was mapped.
  // block_recycler_ must be prepared for one block.
  [[nodiscard]] detail::Block* split_unmapped(detail::Block* u, std::uintptr_t at) noexcept;
  void join_unmapped(detail::Block* u, detail::Block* upper) noexcept;
  [[nodiscard]] detail::Segment* expandable_segment(StreamPools& pools, bool small,
                                                    std::size_t at_least);
  // Makes `segment` (or none) the pool's growing segment, whose FrontCacheRoom its bins keep.
  static void set_growing(StreamPools& pools, bool small, detail::Segment* segment) noexcept;
  // The lowest run of cached and unmapped blocks of `s` that fits `rounded` bytes: its first
  // and last block, or null when none does.
  static void lowest_run(const detail::Segment& s, std::size_t rounded, detail::Block*& start,
                         detail::Block*& last) noexcept;
  // The pool's segment and lowest_run() in it, in a new range when the pool's is full; null
  // when no range has room.
  [[nodiscard]] detail::Segment* run_to_grow(StreamPools& pools, bool small, std::size_t rounded,
                                             detail::Block*& start, detail::Block*& last);
  // Of the `to_map` bytes a growth maps, how many to take from other free pages instead, as
  // the recycling policy and the memory limit say: whole pages.
  [[nodiscard]] std::size_t bytes_to_recycle(std::size_t to_map, std::size_t page) const noexcept;
  // Bookkeeping of the first `bytes` (a page multiple) of unmapped block `u` being mapped (the
  // backend call is the caller's). Returns the cached block that holds them after merging with
  // cached neighbours.
  detail::Block* map_front(detail::Block* u, std::size_t bytes);
  // Bookkeeping of pages [address, address + bytes) inside cached block `c` that are unmapped
  // (or moved away): `c` is split around them. The backend call is the caller's.
  void unmapped_inside(detail::Block* c, std::uintptr_t address, std::size_t bytes) noexcept;
  // Unmaps the whole pages inside cached block `c` (those below `below` only); returns the
  // bytes unmapped.
  std::size_t unmap_free_pages(detail::Block* c,
                               std::uintptr_t below = std::numeric_limits<std::uintptr_t>::max());
  // Whole free pages [from, to) of a cached block that recycling may take (from the top, so
  // the block keeps its lower part and its pointer stays valid).
  struct FreePages {
    detail::Block* block;
    std::uintptr_t from;
    std::uintptr_t to;
  };
  // Which streams' free pages a growth may take (grow_run() says which, from the policy).
  enum class Donors {
    // Any stream's, highest address first (at the limit, and always under `always`).
    every_stream,
    // Its own stream's, highest first; then, for what those do not cover, other streams'
    // (above_peak below the limit).
    own_stream_first,
  };
  // The free pages a miss growing segment `s` may take: every cached block of that page size
  // except those just before a block of `growing` (taking their top pages would merge into
  // it), and of the run's last block only what lies past `needed_end`. Other streams' pages
  // are found through page_donors_ (never by walking every stream); under own_stream_first
  // only until they cover `wanted` bytes with the stream's own, donor bins in the list's order
  // (most recently listed first), then highest address first among those.
  [[nodiscard]] std::vector<FreePages> recycling_sources(const detail::Segment& s,
                                                         const std::vector<detail::Block*>& growing,
                                                         const detail::Block* last,
                                                         std::uintptr_t needed_end, Donors donors,
                                                         std::size_t wanted);
  // Appends to `out` the free pages of `bins` that recycling_sources() may take; their bytes.
  std::size_t gather_free_pages(const detail::FreeBins& bins, const detail::Segment& s,
                                const std::vector<detail::Block*>& growing,
                                const detail::Block* last, std::uintptr_t needed_end,
                                std::vector<FreePages>& out);
  // Moves up to `bytes` (<= u->size) of the `sources`' pages to the front of unmapped block
  // `u`; returns the bytes moved and sets `merged` to the cached block that holds them.
  std::size_t recycle_into(detail::Block* u, std::size_t bytes, std::vector<FreePages>& sources,
                           detail::Block*& merged);
  std::size_t release_expandable_cached();
  void release_expandable_segment(detail::Segment* segment) noexcept;
  // The ranges among `donors` that recycling left with no page mapped: their address ranges go
  // back, and the pools of their streams when left without segments (but last_pools_, the
  // caller's) go too; other streams' pools are not visited.
  void release_emptied_donors(const std::vector<detail::Segment*>& donors) noexcept;
  void count_mapped(detail::Segment* segment, std::int64_t bytes, std::int64_t ranges) noexcept;
  void count_split(const detail::Block* b, int sign) noexcept;  // inactive_split of cached b
  void record_mapping(TraceAction action, std::uintptr_t address, std::size_t bytes,
                      StreamId stream) noexcept;
  // The expandable segment's first page boundary at or above (below) `address`.
  [[nodiscard]] static std::uintptr_t page_up(const detail::Segment& s, std::uintptr_t address);
  [[nodiscard]] static std::uintptr_t page_down(const detail::Segment& s, std::uintptr_t address);

  bool call_free_memory_callbacks();
  void garbage_collect();
  bool release_oversize_cached(StreamPools& pools, std::size_t rounded);
  // Waits for every stream, releases every cached whole segment (and unmaps the free pages of
  // expandable ones), then drops the pools of streams left without segments but last_pools_.
  std::size_t release_all_cached();
  // release_all_cached() when nothing was freed, mapped or unmapped since its last walk: only
  // the ranges reserved since can be released (those a failed growth left with nothing mapped),
  // and their streams' pools when left without segments (but last_pools_).
  void release_new_empty_ranges() noexcept;
  void process_events() noexcept;
  void synchronize_events() noexcept;
  // One of a waiting block's events is done (its EventId goes back to the spares); after its
  // last one the block stops waiting and is cached.
  void event_done(const PendingEvent& pe) noexcept;
  [[nodiscard]] EventId acquire_event();
  // Work that most calls skip, behind one test of hooks_ on the hot path: peak windows to
  // update after an allocation, events to record. Out of line, so the hot path stays small.
  enum Hook : unsigned { kHookWindows = 1U, kHookRecord = 2U };
  // Besides hooks: events are pending or blocks wait for them (the hot path would have to look
  // at them first); sizes round to divisions; blocks wait with expandable segments on (a free
  // then leaves the hot path: caching them later could change what best fit finds); at
  // capacity (tight_): the front cache is bypassed. Expandable segments' placement needs no
  // bit: the segment's FrontCacheRoom, which file_if_hot() tests anyway, says when a free keeps
  // it.
  enum OffHotPath : unsigned {
    kOffWaiting = 4U,
    kOffDivisions = 8U,
    kOffWaitingExpandable = 16U,
    kOffTight = 32U,
    kOffFreeing = kHookWindows | kHookRecord | kOffWaitingExpandable | kOffTight,  // file_if_hot()
    kOffReusing = ~0U,                                                             // reuse()
  };
  // At capacity: with fixed segments, once a new segment has been refused (the memory limit or
  // the device is full, and cached segments are about to be released), every free goes to the
  // bins, merged at once: the front cache's unmerged blocks made the smallest device that fits
  // bigger than PyTorch's. (Best fit takes the lowest address among blocks of its size, as
  // PyTorch's rules do, at capacity or not; with expandable segments only from here on.)
  // Entering it when reserved passed half the limit fitted all 15 traces of the corpus within
  // PyTorch's (at the limit: 12, each within 0.03 GB; with the lowest-address ties and
  // kPrevCached, all 15), but a job that reserves more than half the device, most training
  // jobs, then paid 600-800 instructions per hit pair instead of 149. Set by allocate_segment()
  // before its release-and-retry, cleared by empty_cache() below half the limit.
  void enter_tight() noexcept;
  bool tight_ = false;
  [[nodiscard]] unsigned off_hot_path_now() const noexcept;  // what off_hot_path_ must be
  void update_off_hot_path() noexcept { off_hot_path_ = off_hot_path_now(); }
  void update_hooks() noexcept;
  // Cold and never inlined: inlined, the compiler hoists their loads above the hooks_ test
  // (and after_allocate's return address is where recorded C++ stacks start).
  [[gnu::cold, gnu::noinline]] void after_allocate(const detail::Block& block,
                                                   std::size_t requested) noexcept;
  [[gnu::cold, gnu::noinline]] void record_free(const detail::Block& block) noexcept;
  [[gnu::cold, gnu::noinline]] void record_completed(const detail::Block& block) noexcept;
  [[nodiscard]] bool recording_events() const noexcept { return (hooks_ & kHookRecord) != 0; }
  // The segments and blocks of snapshot(), without the backend and settings strings.
  [[nodiscard]] Snapshot layout() const;
  // poison_freed: cached blocks of host memory are poisoned for AddressSanitizer (on) and
  // unpoisoned when handed out or released (off); no-ops in builds without ASan, without the
  // setting, and for backends whose memory the CPU cannot address.
  void poison(std::uintptr_t address, std::size_t size, bool on = true) const noexcept;

  // Per-pool statistics updates: `small` selects small_pool or large_pool besides all.
  // decrease() changes `current` only (see stats_).
  static void increase(StatArray& stat, bool small, std::int64_t amount) noexcept;
  static void decrease(StatArray& stat, bool small, std::int64_t amount) noexcept;
  // The same by the pool's index (Block::stat_pool()), for the hot path.
  static void increase_in(StatArray& stat, std::size_t pool, std::int64_t amount) noexcept;
  static void decrease_in(StatArray& stat, std::size_t pool, std::int64_t amount) noexcept;

  friend class AllocatorCoreTestAccess;  // tests/allocator/validate_test.cpp breaks invariants

  Backend& backend_;
  AllocatorConfig config_;
  std::size_t split_limit_;  // blocks this big are never split: max_split_size (see ctor)
  // Expandable segments are on (every segment is one): large blocks split like small ones.
  bool split_every_remainder_;
  bool places_by_address_;  // expandable segments whose pages move: place_by_address()
  bool poison_;  // poison_freed is set, the build has ASan and the backend's memory is host
  std::size_t memory_limit_;
  bool rounds_to_divisions_;  // any roundup_power2_divisions > 1: else plain 512-byte rounding
  // Every Stat here keeps in `freed` not the cumulative decrease but the value `current` had at
  // the last reset_accumulated_stats() (0 before): freed = allocated - current + that, which
  // stats() computes, so no decrease writes a second counter.
  // Every statistic but active and active_bytes, which stats() derives: a block is active from
  // its allocation until it is cached, so active = allocation + waiting, where waiting counts
  // the blocks the caller freed whose streams' events are not done yet. The hot path, where
  // nothing waits, then updates neither active statistic (docs/design.md, "Hot path").
  MemoryStats stats_;
  OutOfMemoryError::Figures oom_;  // see oom_figures()
  StatArray waiting_;              // blocks (count)
  StatArray waiting_bytes_;        // their sizes
  // active's and active_bytes' peaks reached while blocks waited (else active == allocation,
  // whose own peak covers it), or their value at the last reset_peak_stats().
  std::array<std::int64_t, kStatPools> active_peak_{};
  std::array<std::int64_t, kStatPools> active_bytes_peak_{};
  PeakScope::Windows windows_;
  unsigned hooks_ = 0;  // Hook bits: what after_allocate() and the free path must do
  // Why calls leave the hot path, in one word that reuse() and file_if_hot() test with one
  // instruction: hooks_' bits and the OffHotPath ones (update_off_hot_path() keeps it).
  unsigned off_hot_path_ = 0;
  std::unique_ptr<detail::Recorder> recorder_;
  // The allocator's clock, which ages cached blocks for gc: allocations made so far. Derived
  // from allocation's cumulative count (so the hot path ticks nothing more), which
  // reset_accumulated_stats() zeroes: what it had is kept here.
  [[nodiscard]] std::uint64_t clock() const noexcept {
    return allocations_before_reset_ +
           static_cast<std::uint64_t>(
               stats_.allocation[static_cast<std::size_t>(StatPool::all)].allocated);
  }
  std::uint64_t allocations_before_reset_ = 0;
  // Frees made so far, the hot path's too (allocations made minus those live), which
  // reset_accumulated_stats() leaves alone. Front caches fill only through frees, and cached
  // memory appears only through frees or a growth (a segment, a range, mapped pages): the walks
  // over every stream of flush_recent() and release_all_cached() are skipped while nothing
  // happened since their last one. At the limit every refused allocation made both walks, over
  // streams that had freed nothing: an RMM log of 60,000 streams took 35 s to replay, 300,000
  // over 120 s (issue 44; bench/oom_replay.cpp). Kept small and local while src/allocator is
  // being split into components (issue 41).
  [[nodiscard]] std::uint64_t frees_so_far() const noexcept {
    return clock() - static_cast<std::uint64_t>(
                         stats_.allocation[static_cast<std::size_t>(StatPool::all)].current);
  }
  std::uint64_t frees_at_flush_ = 0;  // frees_so_far() when flush_recent() last walked
  // What release_all_cached() last left with nothing to release (valid false: walk next time).
  struct ReleaseMark {
    bool valid = false;
    std::uint64_t frees = 0;
    std::int64_t device_allocs = 0;  // stats_' num_device_alloc and num_device_free
    std::int64_t device_frees = 0;
    std::uint64_t ranges = 0;  // ranges_added_
  };
  [[nodiscard]] ReleaseMark release_mark() const noexcept {
    return {true, frees_so_far(), stats_.num_device_alloc, stats_.num_device_free, ranges_added_};
  }
  ReleaseMark released_;
  // Expandable ranges reserved so far: a growth that fails may leave its new range with nothing
  // mapped, which a release gives back (release_new_empty_ranges()).
  std::uint64_t ranges_added_ = 0;
  std::uint64_t stream_walks_ = 0;  // walks of every stream's pools, for tests
  // expandable_segments: pages of each pool, the bytes mapped in all segments, and their most
  // since the last empty_cache() (the above_peak recycling policy's threshold).
  std::size_t small_page_ = 0;
  std::size_t large_page_ = 0;
  std::size_t mapped_ = 0;
  std::size_t mapped_high_water_ = 0;

  // Expandable segments: the bins that hold a whole free page (PageDonors), of the small pools
  // and of the large ones: each pool has one page size, and a growth walks only the lists of
  // its own page size (expandable_segments_page_size may make the large pool's differ).
  // Before pools_: the bins leave them when they go.
  std::array<detail::PageDonors, 2> page_donors_;  // [small pool, large pool]
  [[nodiscard]] detail::PageDonors& page_donors(bool small) noexcept {
    return page_donors_[small ? 0 : 1];
  }
  // Free bins that page recycling has searched for pages, for tests (a growth must visit the
  // donors only, not every stream: tests/allocator/expandable_page_donors_test.cpp).
  std::uint64_t bins_searched_for_pages_ = 0;

  // By stream. Only allocate() (through pools_for), reserve_segment() and release_segment()
  // reach pools, and only drop_unused_pools() removes them: references to a StreamPools are
  // held within one allocate() call, and segments refer to theirs through Segment::bins.
  std::unordered_map<StreamId, std::unique_ptr<StreamPools>> pools_;
  // Most streams are used many times in a row. Never null, so that the hot path need not test
  // it: &no_pools_, whose front cache is always empty, when no stream's pools are cached.
  StreamPools* last_pools_ = &no_pools_;
  StreamPools no_pools_;
  detail::PointerMap live_;  // allocated and recent blocks (a recent one is not allocated)
  detail::Segment* segments_ = nullptr;
  detail::Recycler<detail::Block> block_recycler_;
  detail::Recycler<detail::Segment> segment_recycler_;
  std::vector<PendingEvent> pending_;
  std::vector<EventId> spare_events_;
  std::vector<std::function<bool()>> free_memory_callbacks_;
};

}  // namespace memscope

// The hot path's inline definitions (allocate, deallocate and what they call).
#include "allocator/core_hot_path.hpp"  // IWYU pragma: export
