#include "allocator/allocator_core.hpp"

#include <algorithm>
#include <array>

#include "allocator/size_rules.hpp"

namespace memscope {

using detail::Block;
using detail::FreeBins;
using detail::pool_index;
using detail::Segment;
using detail::signed_size;

namespace {
constexpr std::size_t kAll = detail::kAllPools;
// Blocks and segments the recyclers keep across empty_cache(); the rest go back to the system.
constexpr std::size_t kSpareBlocks = 64;
#ifdef MEMSCOPE_ASAN
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif

// A Stat as kept inside the core (see stats_: `freed` holds the base) as users read it.
Stat reported(Stat kept) noexcept {
  kept.freed = kept.allocated - kept.current + kept.freed;
  return kept;
}

// An active statistic from its allocated counterpart and the waiting blocks' (see stats_):
// active rises only when a block is allocated, by the same amount, so the cumulative increase is
// the allocated one's; it falls when a block is freed without waiting, or stops waiting.
Stat derive_active(const Stat& allocated, const Stat& waiting, std::int64_t peak_while_waiting) {
  Stat active;
  active.current = allocated.current + waiting.current;
  active.allocated = allocated.allocated;
  active.freed = allocated.freed - waiting.allocated + waiting.freed;
  active.peak = std::max(allocated.peak, peak_while_waiting);
  return active;
}

}  // namespace

template <class F>
void AllocatorCore::for_each_kept_stat(F&& f) {
  for (const StatFamily& family : kStatFamilies) {
    for (Stat& stat : stats_.*family.member) f(stat);
  }
  for (const SingleStat& single : kSingleStats) f(stats_.*single.member);
  for (StatArray* waiting : {&waiting_, &waiting_bytes_}) {
    for (Stat& stat : *waiting) f(stat);
  }
}

MemoryStats AllocatorCore::stats() const noexcept {
  MemoryStats out = stats_;
  for (const StatFamily& family : kStatFamilies) {
    for (Stat& stat : out.*family.member) stat = reported(stat);
  }
  for (const SingleStat& single : kSingleStats) out.*single.member = reported(out.*single.member);
  for (std::size_t pool = 0; pool < kStatPools; ++pool) {
    out.active[pool] =
        derive_active(out.allocation[pool], reported(waiting_[pool]), active_peak_[pool]);
    out.active_bytes[pool] = derive_active(
        out.allocated_bytes[pool], reported(waiting_bytes_[pool]), active_bytes_peak_[pool]);
  }
  return out;
}

void AllocatorCore::reset_peak_stats() noexcept {
  stats_.reset_peak();
  for (std::size_t pool = 0; pool < kStatPools; ++pool) {
    active_peak_[pool] = stats_.allocation[pool].current + waiting_[pool].current;
    active_bytes_peak_[pool] = stats_.allocated_bytes[pool].current + waiting_bytes_[pool].current;
  }
}

void AllocatorCore::reset_accumulated_stats() noexcept {
  allocations_before_reset_ = clock();  // the clock runs on
  stats_.reset_accumulated();           // the num_* counters too
  released_.valid = false;              // its mark holds two of them
  for_each_kept_stat([](Stat& stat) {
    stat.allocated = 0;
    stat.freed = stat.current;  // the base: freed counts from here
  });
}

void AllocatorCore::note_active_peaks(bool small) noexcept {
  for (const std::size_t pool : {kAll, pool_index(small)}) {
    active_peak_[pool] =
        std::max(active_peak_[pool], stats_.allocation[pool].current + waiting_[pool].current);
    active_bytes_peak_[pool] =
        std::max(active_bytes_peak_[pool],
                 stats_.allocated_bytes[pool].current + waiting_bytes_[pool].current);
  }
}

AllocatorCore::AllocatorCore(Backend& backend, const AllocatorConfig& config)
    : backend_(backend),
      config_(config),
      // With expandable segments free pages are unmapped or recycled, so the fragmentation
      // max_split_size guards against cannot pin memory: every block may be split and reused
      // (applied, it made PyTorch grow to 14 GiB reserved for 300 MiB live, issue #123548).
      split_limit_(config.expandable_segments ? AllocatorConfig::kUnlimited
                                              : config.max_split_size),
      // A split remainder no longer strands memory in a segment (its pages can be unmapped),
      // so, as PyTorch does with expandable segments, every remainder of 512 bytes is split off.
      split_every_remainder_(config.expandable_segments),
      places_by_address_(config.expandable_segments &&
                         (config.page_recycling == AllocatorConfig::PageRecycling::above_peak ||
                          config.page_recycling == AllocatorConfig::PageRecycling::always)),
      poison_(kAsan && config.poison_freed && backend.memory_kind() == MemoryKind::host),
      memory_limit_(config.memory_limit(backend.capacity())),
      rounds_to_divisions_(std::any_of(config.roundup_power2_divisions.begin(),
                                       config.roundup_power2_divisions.end(),
                                       [](std::uint32_t d) { return d > 1; })) {
  stats_.max_split_size = config.max_split_size == AllocatorConfig::kUnlimited
                              ? -1
                              : signed_size(config.max_split_size);
  if (config.expandable_segments) {
    const std::size_t granularity = backend.page_granularity();
    if (granularity == 0) {
      throw ConfigError("expandable_segments:true: backend " + backend.name() +
                            " cannot map pages; turn expandable_segments off for it",
                        "expandable_segments", "true");
    }
    const std::size_t page = config.expandable_segments_page_size;
    if (page != 0 && (page < granularity || page % granularity != 0)) {
      throw ConfigError("expandable_segments_page_size:" + std::to_string(page) +
                            " is not a multiple of backend " + backend.name() +
                            "'s page granularity (" + std::to_string(granularity) +
                            " bytes); use a multiple of it, e.g. 2MiB",
                        "expandable_segments_page_size", std::to_string(page));
    }
    small_page_ = std::max(granularity, detail::kSmallBuffer);
    large_page_ = page != 0 ? page : small_page_;
  }
  update_off_hot_path();
}

AllocatorCore::~AllocatorCore() noexcept {
  // Pending stream work may still touch the memory: wait for it before handing segments back.
  synchronize_events();
  for (const EventId e : spare_events_) backend_.destroy_event(e);
  while (segments_ != nullptr) {
    Segment* s = segments_;
    segments_ = s->next;
    // An expandable segment's mapped runs are unmapped before its address range goes back.
    for (const Block* b = s->first; s->expandable && b != nullptr;) {
      if (b->unmapped) {
        b = b->next;
        continue;
      }
      const std::uintptr_t start = b->address;
      std::uintptr_t end = start;
      for (; b != nullptr && !b->unmapped; b = b->next) end = b->address + b->size;
      backend_.unmap_pages(reinterpret_cast<void*>(start),  // NOLINT(performance-no-int-to-ptr)
                           end - start, s->page, s->stream);
    }
    for (Block* b = s->first; b != nullptr;) {
      Block* next = b->next;
      delete b;
      b = next;
    }
    poison(s->base, s->size, false);
    void* const base = reinterpret_cast<void*>(s->base);  // NOLINT(performance-no-int-to-ptr)
    if (s->expandable) {
      backend_.release_address_range(base, s->size);
    } else {
      backend_.release(base, s->size);
    }
    delete s;
  }
}

PeakScope::Windows::Values AllocatorCore::peak_counters() const noexcept {
  return {stats_.allocated_bytes[kAll].current, stats_.reserved_bytes[kAll].current,
          stats_.allocated_bytes[kAll].current + waiting_bytes_[kAll].current,
          stats_.requested_bytes[kAll].current};
}

inline AllocatorCore::StreamPools& AllocatorCore::pools_for(StreamId stream) {
  if (last_pools_->stream == stream && last_pools_ != &no_pools_) [[likely]] {
    return *last_pools_;
  }
  return find_pools(stream);
}

AllocatorCore::StreamPools& AllocatorCore::find_pools(StreamId stream) {
  auto& slot = pools_[stream];
  if (!slot) {
    try {
      slot = std::make_unique<StreamPools>();
      slot->stream = stream;
      if (split_every_remainder_) {  // expandable segments: page recycling looks for donors
        slot->small.list_in(&page_donors(true));
        slot->large.list_in(&page_donors(false));
      }
    } catch (...) {
      pools_.erase(stream);  // no empty slot left behind
      throw;
    }
  }
  last_pools_ = slot.get();
  return *last_pools_;
}

void AllocatorCore::drop_unused_pools(const StreamPools* keep) noexcept {
  const std::size_t before = pools_.size();
  for (auto it = pools_.begin(); it != pools_.end();) {
    StreamPools* p = it->second.get();
    if (p->segments == 0 && p != keep) {
      if (p == last_pools_) last_pools_ = &no_pools_;
      it = pools_.erase(it);
    } else {
      ++it;
    }
  }
  if (pools_.size() == before) return;
  try {
    pools_.rehash(0);  // shrink the bucket array too
  } catch (...) {      // keeping the buckets is fine
  }
}

void AllocatorCore::drop_pools_if_unused(StreamId stream, const StreamPools* keep) noexcept {
  const auto it = pools_.find(stream);
  if (it == pools_.end() || it->second->segments != 0 || it->second.get() == keep) return;
  if (it->second.get() == last_pools_) last_pools_ = &no_pools_;
  pools_.erase(it);  // the buckets stay (drop_unused_pools() shrinks them)
}

void* AllocatorCore::allocate_slow(std::size_t size, StreamId stream) {
  if (!pending_.empty()) {
    process_events();
    // Expandable segments: a block whose streams are done is cached now, after the front-cached
    // ones, which a hit would take although best fit might find it (it may be lower).
    if (split_every_remainder_) flush_recent();
  }
  StreamPools& pools = pools_for(stream);
  std::size_t rounded = 0;
  if (size <= detail::kLargestRequest) {
    rounded =
        rounds_to_divisions_ ? detail::round_size(size, config_) : detail::round_size_plain(size);
    // The fast path's case on another stream than the last, after pending events completed, or
    // inside a peak window (every call of a replay). The newest front-cached block only, and
    // only where best fit would pick it too: the others of its pool go to the bins first (an
    // older one of this size is not what best fit would find, and taking it once made the compiled
    // GPT-2 step reserve 3.7% more than PyTorch's rules from its second iteration on), then
    // keeps_placement() asks what the hit cannot: is a neighbour free now (front-cached beside
    // it, or cached after it was filed), or is a block of its size cached below it? If so it
    // goes to the bins too, merges, and best fit decides. Random steps found both (tests/trace/
    // random_steady_test.cpp: 7 of 3,000 one- and two-stream steps reserved up to 2.9% more
    // than PyTorch's rules, and 4 up to 18% more with expandable segments). With placement by
    // address space (above_peak, always) place_by_address() decides instead: keeps_placement()
    // sees cached blocks, not unmapped ones, so its answer depended on what was mapped, and 3
    // of 3,000 random steps reserved more from their second iteration on.
    if (pools.recent.count != 0) {
      if (Block* recent = take_newest_recent(pools.recent, rounded)) {
        flush_recent_into(pools.recent, *recent->segment->bins);
        if (!places_by_address_ && keeps_placement(recent)) return reuse_recent(recent, size);
        flush_recent_block(recent);
      }
    }
  }
  // Everything that can fail for lack of host memory happens here, before any state changes.
  live_.reserve_one();
  block_recycler_.prepare(2);  // a new segment's block and a split remainder
  segment_recycler_.prepare(1);
  // Only this stream's front cache: its blocks are the only ones this stream's bins can use, and
  // walking every stream's here made many streams quadratic. Releasing cached
  // memory (release_all_cached) and garbage collection still flush every stream.
  flush_recent_of(pools.recent);
  Block* block = nullptr;
  bool small = false;
  if (size <= detail::kLargestRequest) {
    small = detail::is_small(rounded);
    FreeBins& bins = small ? pools.small : pools.large;
    if (places_by_address_) block = place_by_address(pools, small, rounded);
    if (block == nullptr) block = take_cached(bins, rounded);
    if (block == nullptr && call_free_memory_callbacks()) block = take_cached(bins, rounded);
    if (block == nullptr) {
      if (config_.garbage_collection_threshold > 0.0) garbage_collect();
      block = config_.expandable_segments ? allocate_expandable(pools, small, rounded)
                                          : allocate_segment(pools, small, rounded);
    }
  }
  if (block == nullptr) {
    // A stream that never got a segment leaves no pools behind (the walk in
    // release_all_cached() that dropped them is skipped while nothing was freed).
    drop_pools_if_unused(stream, nullptr);
    ++stats_.num_ooms;
    oom_ = {};
    OutOfMemoryError::Figures& oom = oom_;
    oom.requested = size;
    oom.capacity = backend_.capacity();
    oom.device_free = backend_.free_bytes();
    oom.allocated = static_cast<std::size_t>(stats_.allocated_bytes[kAll].current);
    oom.reserved = static_cast<std::size_t>(stats_.reserved_bytes[kAll].current);
    oom.limit = memory_limit_;
    if (recording_events()) recorder_->record(TraceAction::oom, oom.device_free, size, 0, stream);
    return nullptr;
  }
  hand_out(block, rounded, size);
  if (hooks_ != 0) [[unlikely]]
    after_allocate(*block, size);
  return reinterpret_cast<void*>(block->address);  // NOLINT(performance-no-int-to-ptr)
}

Block* AllocatorCore::allocate_segment(StreamPools& pools, bool small, std::size_t rounded) {
  const std::size_t bytes = detail::segment_size(rounded);
  Block* block = reserve_segment(bytes, pools, small);
  if (block == nullptr && release_oversize_cached(pools, rounded)) {
    block = reserve_segment(bytes, pools, small);
  }
  if (block == nullptr) {
    enter_tight();  // at the limit: from now on PyTorch's placement (see tight_)
    // Last resort: wait for every stream, hand every cached segment back, and retry.
    release_all_cached();
    ++stats_.num_alloc_retries;
    block = reserve_segment(bytes, pools, small);
  }
  return block;
}

inline Block* AllocatorCore::take_cached(FreeBins& bins, std::size_t rounded) noexcept {
  // Among equal sizes the lowest address, as PyTorch's rules take. The most recent instead made
  // the smallest device that fits cs336-medium ctx128 and ctx512 0.01-0.03 GB bigger than
  // PyTorch's (a segment held a live block PyTorch's rules had left free to release), and with
  // expandable segments (at_limit) reserved 1.0448 of the live peak on ctx128 in the steady
  // state against 1.0089 for PyTorch's expandable rules (now 1.0080). The front cache still
  // hands back the newest block of its size, on the hot path.
  Block* block = bins.best_fit_lowest(rounded);
  if (block == nullptr || !detail::may_serve(block->size, rounded, split_limit_)) {
    return nullptr;
  }
  // Expandable segments: a tail (a free block followed by unmapped space) is spared when
  // another block fits. The common hit, the pool's only free block, needs no search.
  if (split_every_remainder_ && block->next != nullptr && block->next->unmapped && bins.count() > 1)
      [[unlikely]] {
    block = best_fit_sparing_tails(bins, block, rounded);
  }
  bins.remove(block);
  return block;
}

// PyTorch's rule for expandable segments, which keeps them compact: a free block followed by
// unmapped space ranks by the size it could grow to, so any other block that fits comes first
// and the tail is cut into only when nothing else fits.
Block* AllocatorCore::best_fit_sparing_tails(FreeBins& bins, Block* tail,
                                             std::size_t rounded) const noexcept {
  const auto is_tail = [](const Block* b) { return b->next != nullptr && b->next->unmapped; };
  std::array<Block*, 8> tails{};
  std::size_t n = 0;
  Block* found = tail;
  while (found != nullptr && is_tail(found) && n < tails.size()) {
    tails[n++] = found;
    bins.remove(found);
    found = bins.best_fit_lowest(rounded);
    if (found != nullptr && !detail::may_serve(found->size, rounded, split_limit_)) found = nullptr;
  }
  for (std::size_t i = n; i-- > 0;) bins.insert(tails[i]);
  return found != nullptr && !is_tail(found) ? found : tails[0];
}

Segment* AllocatorCore::add_segment(StreamPools& pools, bool small, void* base,
                                    std::size_t size) noexcept {
  Segment* segment = segment_recycler_.acquire();  // cannot fail: allocate() prepared them
  Block* block = block_recycler_.acquire();
  segment->base = reinterpret_cast<std::uintptr_t>(base);
  segment->size = size;
  segment->stream = pools.stream;
  segment->small_pool = small;
  segment->stat_pool = static_cast<std::uint8_t>(detail::pool_index(small));
  segment->first = block;
  segment->bins = small ? &pools.small : &pools.large;
  segment->recent = &pools.recent;
  segment->next = segments_;
  if (segments_ != nullptr) segments_->prev = segment;
  segments_ = segment;
  ++pools.segments;
  block->address = segment->base;
  block->size = size;
  block->segment = segment;
  return segment;
}

Block* AllocatorCore::reserve_segment(std::size_t size, StreamPools& pools, bool small) {
  if (size > memory_limit_ ||
      static_cast<std::size_t>(stats_.reserved_bytes[kAll].current) > memory_limit_ - size) {
    return nullptr;
  }
  void* base = backend_.reserve(size);
  if (base == nullptr) return nullptr;
  Segment* segment = add_segment(pools, small, base, size);
  Block* block = segment->first;
  if (recording_events()) {
    recorder_->record(TraceAction::segment_alloc, segment->base, size, size, pools.stream);
  }

  increase(stats_.segment, small, 1);
  increase(stats_.reserved_bytes, small, signed_size(size));
  if (size >= config_.max_split_size) stats_.oversize_segments.increase(1);
  ++stats_.num_device_alloc;
  return block;
}

void AllocatorCore::enter_tight() noexcept {
  if (tight_ || config_.expandable_segments) return;
  tight_ = true;
  flush_recent();  // every stream's: from now on frees go to the bins
  update_off_hot_path();
}

void AllocatorCore::hand_out(Block* block, std::size_t rounded, std::size_t requested) {
  const bool small = block->small_pool();
  live_.insert(block->address, block);  // cannot fail: allocate() reserved the slot
  // It was an inactive split block (a fresh segment never is).
  if (block->counts_as_split(split_every_remainder_)) {
    decrease(stats_.inactive_split, small, 1);
    decrease(stats_.inactive_split_bytes, small, signed_size(block->size));
  }
  if (detail::should_split(block->size, rounded, small || split_every_remainder_, split_limit_)) {
    Block* rest = split_block_at(block, block->address + rounded);
    rest->cached_at = clock();
    cache_in_bins(rest);
    poison(rest->address, rest->size);  // a fresh segment's remainder was never poisoned
    increase(stats_.inactive_split, small, 1);
    increase(stats_.inactive_split_bytes, small, signed_size(rest->size));
  }
  count_allocation(block, requested);
}

void AllocatorCore::deallocate_slow(Block* block) noexcept {
  if (recording_events()) [[unlikely]]
    record_free(*block);
  uncount_allocation(block);
  if (!block->stream_uses.empty()) {
    try {
      for (const StreamId s : block->stream_uses) {
        const EventId e = acquire_event();
        pending_.push_back({e, s, block});  // capacity grows before the event is recorded
        ++block->pending_events;
        backend_.record_event(e, s);
      }
    } catch (...) {
      // The device could not record the event: the stream may still use the block, so it is
      // never reused (it stays pending, visible in snapshots) rather than risk corruption.
      ++block->pending_events;
    }
    block->stream_uses.clear();
    block->unmark_slow_free(Block::kOtherStreams);
  }
  if (block->pending_events > 0) {  // stays active until its streams' events are done
    increase(waiting_, block->small_pool(), 1);
    increase(waiting_bytes_, block->small_pool(), signed_size(block->size));
    update_off_hot_path();
  }
  // The stream's front-cached blocks of this pool go to its bins first, so that what decides
  // below sees them merged: kept there, an older block of this size at a lower address, or a
  // neighbour, was invisible to keeps_placement() (with expandable segments, random steps called
  // directly, without a replay's peak window, reserved 1.18 of their live peak against
  // PyTorch's expandable rules' 1.0017: the hit took the newer of two freed blocks of one size).
  // The other pool's stay: they are no neighbours, and no fit for this block's size.
  flush_recent_into(*block->segment->recent, *block->segment->bins);
  if (block->pending_events == 0 && !tight_ &&
      (!split_every_remainder_ || ((off_hot_path_ & kOffWaiting) == 0 && keeps_placement(block))) &&
      front_cache_keeps_placement(block)) {
    keep_recent(block);  // stays in the pointer map: its next allocation needs no insert
    return;
  }
  live_.erase(block->address);
  if (block->pending_events == 0) cache_block(block);
}

void AllocatorCore::cache_in_bins(Block* block) noexcept {
  FreeBins& bins = *block->segment->bins;
  // Fixed segments (expandable ones keep placement through their FrontCacheRoom): the block
  // before it, and, when the bins held one block, the block before that one, which
  // front_cache_keeps_placement() let off while best fit had nothing else to pick.
  if (!block->segment->expandable) {
    if (block->prev != nullptr) block->prev->mark_slow_free(Block::kNextCached);
    if (block->next != nullptr) block->next->mark_slow_free(Block::kPrevCached);
    if (const Block* only = bins.only_block(); only != nullptr && only->prev != nullptr) {
      only->prev->mark_slow_free(Block::kNextCached);
    }
  }
  bins.insert(block);
}

bool AllocatorCore::front_cache_keeps_placement(Block* block) noexcept {
  const auto marks =
      static_cast<std::uint8_t>(block->use.slow_free & (Block::kNextCached | Block::kPrevCached));
  if (marks == 0) return true;
  // Its previous neighbour cached: best fit splits the merged block at that neighbour's lower
  // address, where PyTorch's rules place the next allocation of this size (cs336-medium ctx128
  // at capacity: a 2 MiB block taken back above a cached 4 MiB one left a 20 MiB segment
  // holding a live block that PyTorch's rules had left free to release).
  if (block->prev != nullptr && block->prev->cached) return false;
  if ((marks & Block::kNextCached) == 0) {
    block->unmark_slow_free(Block::kPrevCached);
    return true;
  }
  // Its next neighbour cached beside other cached blocks: best fit merges the two and may find
  // a better fit among the others, placing the allocation elsewhere (octree-nca2d and cs336-xl
  // bf16 reserved more than PyTorch's rules). To the bins, then, where it merges.
  // With that block alone in the bins, best fit would split the merged block where the hit
  // takes it: the reason is gone until FreeBins caches a second block (mark_next_cached).
  const Block* next = block->next;
  if (next != nullptr && next->cached && block->segment->bins->count() != 1) return false;
  block->unmark_slow_free(marks);
  return true;
}

void AllocatorCore::keep_recent(Block* block) noexcept {
  detail::RecentFrees& recent = *block->segment->recent;
  if (recent.count == recent.blocks.size()) {  // the oldest goes to the bins
    flush_recent_block(recent.blocks[0]);
    std::copy(recent.blocks.begin() + 1, recent.blocks.end(), recent.blocks.begin());
    --recent.count;
  }
  file_recent(block, recent);
}

void AllocatorCore::flush_recent() noexcept {
  // Only frees fill front caches: with none since the last walk, every one is empty.
  const std::uint64_t frees = frees_so_far();
  if (frees == frees_at_flush_) return;
  ++stream_walks_;
  for (const auto& entry : pools_) flush_recent_of(entry.second->recent);
  frees_at_flush_ = frees;
}

void AllocatorCore::flush_recent_of(detail::RecentFrees& recent) noexcept {
  for (std::size_t i = 0; i < recent.count; ++i) flush_recent_block(recent.blocks[i]);
  recent.count = 0;
}

void AllocatorCore::flush_recent_into(detail::RecentFrees& recent,
                                      const detail::FreeBins& bins) noexcept {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < recent.count; ++i) {
    Block* b = recent.blocks[i];
    if (b->segment->bins == &bins) {
      flush_recent_block(b);
    } else {
      recent.blocks[kept++] = b;
    }
  }
  recent.count = kept;
}

bool AllocatorCore::has_recent() const noexcept {
  // Streams are few; a count of them all would cost the hot path an update at every hit.
  return std::any_of(pools_.begin(), pools_.end(),
                     [](const auto& entry) { return entry.second->recent.count != 0; });
}

void AllocatorCore::flush_recent_block(Block* block) noexcept {
  block->recent = false;
  live_.erase(block->address);
  merge_into_bins(block);
}

void AllocatorCore::cache_block(Block* block) noexcept {
  // The stream's front-cached blocks go to the bins first, in the order they were freed, so
  // that the bins are as if each had been merged when freed (placement then stays PyTorch's;
  // see keeps_placement()). Only this stream's: no other stream's bins see
  // this block, and walking every stream at each slow free made many streams quadratic.
  // Except under above_peak, whose growth above the peak takes other streams' whole free pages
  // from their bins only (page_donors_): merged here, what they freed a moment ago is there too
  // (without, two of the six three-stream steps reserved 1.0296 and 1.0266 of live, not 1.02).
  // Fixed segments as well as expandable ones: a front-cached neighbour of this block, or of
  // the block it merges with, would otherwise stay there beside free space, and the hot path
  // would hand it back where best fit merges it and may place elsewhere
  // (FrontCachePlacement.AFrontCachedBlockLeavesWhenItsNeighbourIsCachedLater).
  if (split_every_remainder_ &&
      config_.page_recycling == AllocatorConfig::PageRecycling::above_peak) {
    flush_recent();
  } else {
    flush_recent_of(*block->segment->recent);
  }
  uncount_active(block);
  merge_into_bins(block);
}

Block* AllocatorCore::join_blocks(Block* low, Block* high) noexcept {
  low->size += high->size;
  low->next = high->next;
  if (high->next != nullptr) high->next->prev = low;
  block_recycler_.recycle(high);
  return low;
}

Block* AllocatorCore::split_block_at(Block* b, std::uintptr_t at) noexcept {
  Block* upper = block_recycler_.acquire();
  upper->address = at;
  upper->size = b->address + b->size - at;
  upper->segment = b->segment;
  upper->prev = b;
  upper->next = b->next;
  if (b->next != nullptr) b->next->prev = upper;
  b->next = upper;
  b->size = at - b->address;
  return upper;
}

void AllocatorCore::merge_into_bins(Block* block) noexcept {
  const bool small = block->small_pool();
  FreeBins& bins = *block->segment->bins;
  std::int64_t split_blocks = 0;  // net change of inactive_split (count and bytes)
  std::int64_t split_bytes = 0;
  if (block->prev != nullptr && block->prev->cached) {
    Block* prev = block->prev;
    bins.remove(prev);
    split_blocks -= 1;
    split_bytes -= signed_size(prev->size);
    block = join_blocks(prev, block);
  }
  if (block->next != nullptr && block->next->cached) {
    Block* next = block->next;
    bins.remove(next);
    split_blocks -= 1;
    split_bytes -= signed_size(next->size);
    join_blocks(block, next);
  }
  block->requested_size = 0;
  block->pending_events = 0;
  block->cached_at = clock();
  if (block->shares_mapped_range()) {  // is_split() in a fixed segment
    split_blocks += 1;
    split_bytes += signed_size(block->size);
  }
  cache_in_bins(block);
  poison(block->address, block->size);
  if (split_blocks > 0) increase(stats_.inactive_split, small, split_blocks);
  if (split_blocks < 0) decrease(stats_.inactive_split, small, -split_blocks);
  if (split_bytes > 0) increase(stats_.inactive_split_bytes, small, split_bytes);
  if (split_bytes < 0) decrease(stats_.inactive_split_bytes, small, -split_bytes);
}

void AllocatorCore::release_segment(Block* block) noexcept {
  Segment* segment = block->segment;
  if (recording_events()) {
    recorder_->record(TraceAction::segment_free, segment->base, segment->size, segment->size,
                      segment->stream);
  }
  segment->bins->remove(block);
  poison(segment->base, segment->size, false);
  backend_.release(reinterpret_cast<void*>(segment->base), segment->size);  // NOLINT
  const bool small = segment->small_pool;
  decrease(stats_.segment, small, 1);
  decrease(stats_.reserved_bytes, small, signed_size(segment->size));
  if (segment->size >= config_.max_split_size) --stats_.oversize_segments.current;
  ++stats_.num_device_free;
  if (segment->prev != nullptr) segment->prev->next = segment->next;
  if (segment->next != nullptr) segment->next->prev = segment->prev;
  if (segments_ == segment) segments_ = segment->next;
  if (const auto pools = pools_.find(segment->stream); pools != pools_.end()) {
    --pools->second->segments;  // always found: a segment's pools outlive it
  }
  block_recycler_.recycle(block);
  segment_recycler_.recycle(segment);
}

void AllocatorCore::record_stream(void* ptr, StreamId stream) {
  // Address 0 is the pointer map's empty key: find() must never see it.
  Block* block = ptr == nullptr ? nullptr : live_.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (block == nullptr || !block->use.allocated) {
    throw InvalidPointerError(
        "record_stream: the pointer is not a live allocation of this "
        "allocator (freed already, or allocated elsewhere)");
  }
  if (stream == block->stream()) return;  // its own stream orders the reuse already
  if (std::find(block->stream_uses.begin(), block->stream_uses.end(), stream) ==
      block->stream_uses.end()) {
    block->stream_uses.push_back(stream);
    block->mark_slow_free(Block::kOtherStreams);
  }
}

const Block* AllocatorCore::find(const void* ptr) const noexcept {
  if (ptr == nullptr) return nullptr;  // the pointer map's empty key: find() must never see it
  const Block* block = live_.find(reinterpret_cast<std::uintptr_t>(ptr));
  return block != nullptr && block->use.allocated ? block : nullptr;
}

std::size_t AllocatorCore::empty_cache() {
  const std::size_t released = release_all_cached();
  mapped_high_water_ = mapped_;  // recycling's threshold starts again from what is left
  if (tight_ && static_cast<std::size_t>(stats_.reserved_bytes[kAll].current) < memory_limit_ / 2) {
    tight_ = false;  // the front cache is back
    update_off_hot_path();
  }
  if (recording_events()) {
    recorder_->record(TraceAction::empty_cache, 0, released, 0, kDefaultStream);
  }
  block_recycler_.trim(kSpareBlocks);
  segment_recycler_.trim(kSpareBlocks);
  return released;
}

bool AllocatorCore::call_free_memory_callbacks() {
  bool freed = false;
  for (const auto& callback : free_memory_callbacks_) freed = callback() || freed;
  return freed;
}

std::size_t AllocatorCore::release_all_cached() {
  synchronize_events();  // waiting blocks were freed since the mark: it no longer holds then
  const ReleaseMark now = release_mark();
  if (released_.valid && now.frees == released_.frees &&
      now.device_allocs == released_.device_allocs && now.device_frees == released_.device_frees) {
    release_new_empty_ranges();  // the rest would find nothing (frees_so_far())
    released_ = release_mark();
    return 0;
  }
  ++stream_walks_;
  flush_recent();
  std::vector<Block*> whole;
  for (const auto& entry : pools_) {
    const auto collect = [&whole](Block* b) {
      if (!b->is_split() && !b->segment->expandable) whole.push_back(b);
    };
    entry.second->small.for_each(detail::kSmallBuffer, collect);
    entry.second->large.for_each(0, collect);
  }
  std::size_t released = 0;
  for (Block* b : whole) {
    released += b->size;
    release_segment(b);
  }
  if (config_.expandable_segments) released += release_expandable_cached();
  // Streams left without segments go too, or every later release walks them again: at the
  // limit each new stream's first allocation retries (a fit search over an RMM log of 40,000
  // streams took 49 s). last_pools_ stays: allocate() holds it, also while a
  // free-memory callback calls empty_cache().
  drop_unused_pools(last_pools_);
  released_ = release_mark();
  return released;
}

bool AllocatorCore::release_oversize_cached(StreamPools& pools, std::size_t rounded) {
  if (config_.max_split_size == AllocatorConfig::kUnlimited) return false;
  const std::size_t wanted = std::max(rounded, config_.max_split_size);
  std::vector<Block*> oversize;
  pools.large.for_each(config_.max_split_size, [&oversize](Block* b) {
    if (!b->is_split() && !b->segment->expandable) oversize.push_back(b);
  });
  // One block big enough: release the smallest such.
  Block* best = nullptr;
  for (Block* b : oversize) {
    if (b->size >= wanted && (best == nullptr || b->size < best->size)) best = b;
  }
  if (best != nullptr) {
    release_segment(best);
    return true;
  }
  // Otherwise release the biggest ones until together they make room for the request.
  std::sort(oversize.begin(), oversize.end(), [](Block* a, Block* b) { return a->size > b->size; });
  std::size_t released = 0;
  for (Block* b : oversize) {
    if (released >= wanted) break;
    released += b->size;
    release_segment(b);
  }
  return released >= wanted;
}

void AllocatorCore::garbage_collect() {
  const auto threshold = static_cast<std::size_t>(config_.garbage_collection_threshold *
                                                  static_cast<double>(memory_limit_));
  const auto reserved = static_cast<std::size_t>(stats_.reserved_bytes[kAll].current);
  if (reserved <= threshold) return;
  // Collection frees only large-pool memory. With none of it free (a front-cached block is not
  // allocated either) there is nothing to find, and the walk of every stream below was the cost
  // of each miss above the threshold: 40,000 streams of small blocks took 21 s.
  constexpr auto kLarge = static_cast<std::size_t>(StatPool::large);
  if (stats_.reserved_bytes[kLarge].current == stats_.allocated_bytes[kLarge].current) return;
  flush_recent();  // collection looks at every stream's cached blocks (allocate flushed one)
  const std::size_t target = reserved - threshold;
  // Large cached segments, by age (allocations since they were cached); with expandable
  // segments, large cached blocks with whole pages inside, whose pages are unmapped.
  std::vector<Block*> freeable;
  for (const auto& entry : pools_) {
    entry.second->large.for_each(0, [&freeable](Block* b) {
      const Segment& s = *b->segment;
      if (s.expandable ? page_up(s, b->address) + s.page <= b->address + b->size : !b->is_split()) {
        freeable.push_back(b);
      }
    });
  }
  // Release every block at least as old as the average, round after round, until the target is
  // met: releasing more than needed keeps gc from triggering again on the next miss.
  std::size_t reclaimed = 0;
  while (reclaimed < target && !freeable.empty()) {
    double total_age = 0;
    for (const Block* b : freeable) total_age += static_cast<double>(clock() - b->cached_at);
    const double average = total_age / static_cast<double>(freeable.size());
    const auto old = std::stable_partition(freeable.begin(), freeable.end(), [&](const Block* b) {
      return static_cast<double>(clock() - b->cached_at) < average;
    });
    for (auto it = old; it != freeable.end(); ++it) {
      if ((*it)->segment->expandable) {
        reclaimed += unmap_free_pages(*it);  // touches no other cached block
      } else {
        reclaimed += (*it)->size;
        release_segment(*it);
      }
    }
    freeable.erase(old, freeable.end());
  }
}

EventId AllocatorCore::acquire_event() {
  if (!spare_events_.empty()) {
    const EventId e = spare_events_.back();
    spare_events_.pop_back();
    return e;
  }
  // Keep room to take every event back without allocating (process_events is noexcept).
  spare_events_.reserve(pending_.size() + spare_events_.size() + 1);
  return backend_.create_event();
}

void AllocatorCore::process_events() noexcept {
  // Events on one stream complete in order: after the first one that is not done, skip the
  // stream's later events without asking the backend.
  std::array<StreamId, 8> blocked{};
  std::size_t n_blocked = 0;
  std::size_t kept = 0;
  for (const PendingEvent& pe : pending_) {
    const bool stream_blocked =
        std::find(blocked.begin(), blocked.begin() + static_cast<std::ptrdiff_t>(n_blocked),
                  pe.stream) != blocked.begin() + static_cast<std::ptrdiff_t>(n_blocked);
    bool done = false;
    if (!stream_blocked) {
      try {
        done = backend_.query_event(pe.event);
      } catch (...) {
        done = false;
      }
    }
    if (!done) {
      if (!stream_blocked && n_blocked < blocked.size()) blocked[n_blocked++] = pe.stream;
      pending_[kept++] = pe;
      continue;
    }
    event_done(pe);
  }
  pending_.resize(kept);
  update_off_hot_path();
}

void AllocatorCore::event_done(const PendingEvent& pe) noexcept {
  spare_events_.push_back(pe.event);
  Block* const block = pe.block;
  if (--block->pending_events != 0) return;  // other streams' events still to come
  if (recording_events()) record_completed(*block);
  decrease(waiting_, block->small_pool(), 1);
  decrease(waiting_bytes_, block->small_pool(), signed_size(block->size));
  cache_block(block);
}

void AllocatorCore::synchronize_events() noexcept {
  ++stats_.num_sync_all_streams;
  for (const PendingEvent& pe : pending_) {
    try {
      backend_.synchronize_event(pe.event);
    } catch (...) {
      // A failing device cannot be waited on; the block is handed back as the device is gone.
    }
    event_done(pe);
  }
  pending_.clear();
  update_off_hot_path();
}

void AllocatorCore::update_hooks() noexcept {
  hooks_ = (windows_.empty() ? 0U : kHookWindows) |
           (recorder_ != nullptr && recorder_->wants_frees() ? kHookRecord : 0U);
  update_off_hot_path();
}

unsigned AllocatorCore::off_hot_path_now() const noexcept {
  // A block can wait with no event pending (recording its event failed), so both are looked at.
  const bool waiting = !pending_.empty() || waiting_[detail::kAllPools].current != 0;
  return hooks_ | (waiting ? kOffWaiting : 0U) | (rounds_to_divisions_ ? kOffDivisions : 0U) |
         (waiting && config_.expandable_segments ? kOffWaitingExpandable : 0U) |
         (tight_ ? kOffTight : 0U);
}

void AllocatorCore::open_window(PeakScope::Windows::Window& window) noexcept {
  windows_.open(window, peak_counters());
  update_hooks();
}

void AllocatorCore::close_window(PeakScope::Windows::Window& window) noexcept {
  windows_.close(window);
  update_hooks();
}

void AllocatorCore::start_recording(const RecordingOptions& options) {
  recorder_ = std::make_unique<detail::Recorder>(options);  // the earlier log goes
  update_hooks();
}

void AllocatorCore::stop_recording() noexcept {
  if (recorder_ != nullptr) recorder_->stop();
  update_hooks();
}

void AllocatorCore::after_allocate(const Block& block, std::size_t requested) noexcept {
  if ((hooks_ & kHookWindows) != 0) windows_.observe(peak_counters());
  if ((hooks_ & kHookRecord) != 0) {
    // Stacks start at our caller (the allocator's allocate()): the recorder's frames are noise.
    recorder_->record_alloc(block.address, requested, block.size, block.stream(),
                            reinterpret_cast<std::uintptr_t>(__builtin_return_address(0)));
  }
}

void AllocatorCore::record_free(const Block& block) noexcept {
  // Without streams to wait for, the block goes back to the cache in this very call.
  recorder_->record_free(block.address, block.requested_size, block.size, block.stream(),
                         block.stream_uses.empty());
  if (!recorder_->active()) update_hooks();  // the last stack forgotten: frees are free again
}

void AllocatorCore::record_completed(const Block& block) noexcept {
  recorder_->record_completed(block.address, block.requested_size, block.size, block.stream());
  if (!recorder_->active()) update_hooks();
}

}  // namespace memscope
