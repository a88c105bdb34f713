#include "allocator/allocator_core.hpp"

#include <algorithm>
#include <array>

#include "allocator/size_rules.hpp"

namespace memscope {

using detail::Block;
using detail::FreeBins;
using detail::Segment;
using detail::signed_size;

AllocatorCore::AllocatorCore(Backend& backend, const AllocatorConfig& config)
    : backend_(backend),
      config_(config),
      rules_(config),
      poison_(detail::kAsan && config.poison_freed && backend.memory_kind() == MemoryKind::host),
      memory_limit_(config.memory_limit(backend.capacity())),
      statistics_(config.max_split_size),
      store_(config.expandable_segments),
      events_(backend),
      reclaim_(config),
      fixed_(backend, store_, statistics_, reclaim_, host_, memory_limit_, poison_),
      expandable_(backend, config_, store_, statistics_, host_, memory_limit_, poison_),
      source_(config.expandable_segments ? static_cast<detail::SegmentSource*>(&expandable_)
                                         : &fixed_) {
  update_off_hot_path();
}

AllocatorCore::~AllocatorCore() noexcept {
  // Pending stream work may still touch the memory: wait for it before handing segments back.
  synchronize_events();
  events_.destroy_spares();
  for (const Segment* s = store_.segments(); s != nullptr; s = s->next) {
    source_->release_at_exit(*s);
  }
  // store_ deletes the blocks and segments.
}

void* AllocatorCore::allocate_slow(std::size_t size, StreamId stream) {
  if (events_.any_pending()) {
    process_events();
    // Expandable segments: a block whose streams are done is cached now, after the front-cached
    // ones, which a hit would take although best fit might find it (it may be lower).
    if (rules_.split_every_remainder) flush_recent();
  }
  StreamPools& pools = store_.pools_for(stream);
  std::size_t rounded = 0;
  if (size <= detail::kLargestRequest) {
    rounded = rules_.rounds_to_divisions ? detail::round_size(size, config_)
                                         : detail::round_size_plain(size);
    // The hit's case, where best fit would place it too (FrontCache::take_placed).
    if (Block* recent = detail::FrontCache::take_placed(pools.recent, rounded,
                                                        rules_.places_by_address, merge_recent())) {
      return reuse_recent(recent, size);
    }
  }
  // Everything that can fail for lack of host memory happens here, before any state changes.
  store_.live().reserve_one();
  store_.prepare(2, 1);  // a new segment's block and a split remainder; a segment
  // Only this stream's front cache: its blocks are the only ones this stream's bins can use, and
  // walking every stream's here made many streams quadratic. Releasing cached
  // memory (release_all_cached) and garbage collection still flush every stream.
  detail::FrontCache::flush(pools.recent, merge_recent());
  Block* block = nullptr;
  bool small = false;
  if (size <= detail::kLargestRequest) {
    small = detail::is_small(rounded);
    FreeBins& bins = small ? pools.small : pools.large;
    if (rules_.places_by_address) block = source_->place(pools, small, rounded);
    if (block == nullptr)
      block = bins.take_best_fit(rounded, rules_.split_limit, rules_.split_every_remainder);
    if (block == nullptr && reclaim_.call_free_memory_callbacks()) {
      block = bins.take_best_fit(rounded, rules_.split_limit, rules_.split_every_remainder);
    }
    if (block == nullptr) {
      if (reclaim_.collects_garbage()) garbage_collect();
      block = grow(pools, small, rounded);
    }
  }
  if (block == nullptr) {
    store_.drop_refused_pools(stream);  // a stream that never got a segment leaves nothing
    oom_ = statistics_.count_oom(size, backend_.capacity(), backend_.free_bytes(), memory_limit_);
    hooks_.event(TraceAction::oom, oom_.device_free, size, 0, stream);
    return nullptr;
  }
  hand_out(block, rounded, size);
  if (hooks_.bits() != 0) [[unlikely]]
    hooks_.after_allocate(*block, size);
  return reinterpret_cast<void*>(block->address);  // NOLINT(performance-no-int-to-ptr)
}

Block* AllocatorCore::grow(StreamPools& pools, bool small, std::size_t rounded) {
  Block* block = source_->grow(pools, small, rounded);
  if (block == nullptr && source_->release_some(pools, rounded)) {
    block = source_->grow(pools, small, rounded);
  }
  if (block == nullptr) {
    enter_tight();  // fixed segments at the limit: from now on PyTorch's placement
    // Last resort: wait for every stream, hand back every cached segment (unmap every free
    // page with expandable segments), and retry.
    release_all_cached();
    statistics_.count_alloc_retry();
    block = source_->grow(pools, small, rounded);
  }
  return block;
}

void AllocatorCore::enter_tight() noexcept {
  if (front_cache_.bypassed() || config_.expandable_segments) return;
  front_cache_.bypass(true);
  flush_recent();  // every stream's: from now on frees go to the bins
  update_off_hot_path();
}

void AllocatorCore::hand_out(Block* block, std::size_t rounded, std::size_t requested) {
  const bool small = block->small_pool();
  store_.live().insert(block->address, block);  // cannot fail: allocate() reserved the slot
  // It was an inactive split block (a fresh segment never is).
  if (block->counts_as_split(rules_.split_every_remainder)) {
    statistics_.change_split(small, -1, -signed_size(block->size));
  }
  if (detail::should_split(block->size, rounded, small || rules_.split_every_remainder,
                           rules_.split_limit)) {
    Block* rest = store_.split_at(block, block->address + rounded);
    rest->cached_at = clock();
    detail::FrontCache::cache_in_bins(rest);
    poison(rest->address, rest->size);  // a fresh segment's remainder was never poisoned
    statistics_.change_split(small, 1, signed_size(rest->size));
  }
  count_allocation(block, requested);
}

void AllocatorCore::deallocate_slow(Block* block) noexcept {
  if (hooks_.recording_events()) [[unlikely]] {
    if (hooks_.record_free(*block)) update_off_hot_path();
  }
  uncount_allocation(block);
  events_.record_frees(*block);
  if (block->pending_events > 0) {  // stays active until its streams' events are done
    statistics_.start_waiting(block->small_pool(), block->size);
    update_off_hot_path();
  }
  // Into the front cache as FrontCache::admits() says, after its pool's front-cached blocks.
  if (front_cache_.admits(block, rules_.split_every_remainder,
                          (off_hot_path_ & Gate::kWaiting) != 0, merge_recent())) {
    keep_recent(block);  // stays in the pointer map: its next allocation needs no insert
    return;
  }
  store_.live().erase(block->address);
  if (block->pending_events == 0) cache_block(block);
}

void AllocatorCore::keep_recent(Block* block) noexcept {
  detail::RecentFrees& recent = *block->segment->recent;
  if (Block* oldest = detail::FrontCache::make_room(recent)) flush_recent_block(oldest);
  file_recent(block, recent);
}

void AllocatorCore::flush_recent() noexcept {
  if (front_cache_.flush_all(store_, statistics_.frees(), merge_recent())) ++stream_walks_;
}

void AllocatorCore::flush_recent_block(Block* block) noexcept {
  block->recent = false;
  store_.live().erase(block->address);
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
  if (rules_.split_every_remainder &&
      config_.page_recycling == AllocatorConfig::PageRecycling::above_peak) {
    flush_recent();
  } else {
    detail::FrontCache::flush(*block->segment->recent, merge_recent());
  }
  uncount_active(block);
  merge_into_bins(block);
}

void AllocatorCore::merge_into_bins(Block* block) noexcept {
  const bool small = block->small_pool();
  const detail::Merged merged = store_.merge_free(block, clock());
  detail::FrontCache::cache_in_bins(merged.block);
  poison(merged.block->address, merged.block->size);
  statistics_.change_split(small, merged.split_blocks, merged.split_bytes);
}

void AllocatorCore::record_stream(void* ptr, StreamId stream) {
  Block* block = store_.allocated_at(ptr);
  if (block == nullptr) {
    throw InvalidPointerError(
        "record_stream: the pointer is not a live allocation of this "
        "allocator (freed already, or allocated elsewhere)");
  }
  detail::StreamEvents::add_use(*block, stream);
}

std::size_t AllocatorCore::empty_cache() {
  const std::size_t released = release_all_cached();
  expandable_.restart_high_water();  // recycling's threshold starts again from what is left
  if (front_cache_.bypassed() &&
      static_cast<std::size_t>(statistics_.reserved_bytes()) < memory_limit_ / 2) {
    front_cache_.bypass(false);  // the front cache is back
    update_off_hot_path();
  }
  hooks_.event(TraceAction::empty_cache, 0, released, 0, kDefaultStream);
  store_.trim_spares();
  return released;
}

std::size_t AllocatorCore::release_all_cached() {
  synchronize_events();  // what waited was freed after the last walk: the test below sees it
  if (reclaim_.release_finds_nothing(statistics_.frees())) return 0;
  ++stream_walks_;
  flush_recent();
  const std::size_t released = source_->release_cached();
  // Streams left without segments go too, or every later release walks them again: at the
  // limit each new stream's first allocation retries (a fit search over an RMM log of 40,000
  // streams took 49 s). last_pools() stays: allocate() holds it, also while a
  // free-memory callback calls empty_cache().
  store_.drop_unused_pools();
  reclaim_.released(statistics_.frees());
  return released;
}

void AllocatorCore::garbage_collect() {
  const std::size_t target = reclaim_.garbage_target(
      static_cast<std::size_t>(statistics_.reserved_bytes()), memory_limit_);
  if (target == 0) return;
  // Collection frees only large-pool memory. With none of it free (a front-cached block is not
  // allocated either) there is nothing to find, and the walk of every stream below was the cost
  // of each miss above the threshold: 40,000 streams of small blocks took 21 s.
  if (statistics_.reserved_bytes(StatPool::large) == statistics_.allocated_bytes(StatPool::large)) {
    return;
  }
  flush_recent();  // collection looks at every stream's cached blocks (allocate flushed one)
  detail::Reclaim::collect_garbage(store_, *source_, target, clock());
}

void AllocatorCore::process_events() noexcept {
  events_.process([this](Block* block) { stop_waiting(block); });
  update_off_hot_path();
}

void AllocatorCore::stop_waiting(Block* block) noexcept {
  if (hooks_.recording_events() && hooks_.record_completed(*block)) update_off_hot_path();
  statistics_.stop_waiting(block->small_pool(), block->size);
  cache_block(block);
}

void AllocatorCore::synchronize_events() noexcept {
  statistics_.count_sync_all_streams();
  events_.synchronize([this](Block* block) { stop_waiting(block); });
  update_off_hot_path();
}

unsigned AllocatorCore::off_hot_path_now() const noexcept {
  // A block can wait with no event pending (recording its event failed), so both are looked at.
  return Gate::derive(hooks_.bits(), events_.any_pending() || statistics_.blocks_wait(),
                      rules_.rounds_to_divisions, config_.expandable_segments,
                      front_cache_.bypassed());
}

}  // namespace memscope
