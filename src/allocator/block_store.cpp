#include "allocator/block_store.hpp"

#include <algorithm>
#include <unordered_set>
#include <utility>

#include <fmt/format.h>

#include "allocator/allocator_statistics.hpp"
#include "allocator/invariant.hpp"

namespace memscope::detail {

namespace {

void add_block(SegmentInfo& info, const Block& b) {
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

BlockStore::~BlockStore() {
  while (segments_ != nullptr) {
    Segment* s = segments_;
    segments_ = s->next;
    for (Block* b = s->first; b != nullptr;) {
      Block* next = b->next;
      delete b;
      b = next;
    }
    delete s;
  }
}

StreamPools& BlockStore::find_pools(StreamId stream) {
  auto& slot = pools_[stream];
  if (!slot) {
    try {
      slot = std::make_unique<StreamPools>();
      slot->stream = stream;
      if (lists_page_donors_) {  // expandable segments: page recycling looks for donors
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

void BlockStore::drop_unused_pools() noexcept {
  const std::size_t before = pools_.size();
  for (auto it = pools_.begin(); it != pools_.end();) {
    StreamPools* p = it->second.get();
    if (p->segments == 0 && p != last_pools_) {
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

void BlockStore::drop_pools_if_unused(StreamId stream) noexcept {
  const auto it = pools_.find(stream);
  if (it == pools_.end() || it->second->segments != 0 || it->second.get() == last_pools_) return;
  pools_.erase(it);  // the buckets stay (drop_unused_pools() shrinks them)
}

void BlockStore::drop_refused_pools(StreamId stream) noexcept {
  const auto it = pools_.find(stream);
  if (it == pools_.end() || it->second->segments != 0) return;
  if (it->second.get() == last_pools_) last_pools_ = &no_pools_;
  pools_.erase(it);
}

Segment* BlockStore::add_segment(StreamPools& pools, bool small, void* base,
                                 std::size_t size) noexcept {
  Segment* segment = segment_recycler_.acquire();  // cannot fail: prepared
  Block* block = block_recycler_.acquire();
  segment->base = reinterpret_cast<std::uintptr_t>(base);
  segment->size = size;
  segment->stream = pools.stream;
  segment->small_pool = small;
  segment->stat_pool = static_cast<std::uint8_t>(pool_index(small));
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

void BlockStore::forget_segment(Segment* segment) noexcept {
  if (segment->prev != nullptr) segment->prev->next = segment->next;
  if (segment->next != nullptr) segment->next->prev = segment->prev;
  if (segments_ == segment) segments_ = segment->next;
  if (StreamPools* pools = pools_of(segment->stream); pools != nullptr) {
    --pools->segments;  // always found: a segment's pools outlive it
  }
  for (Block* b = segment->first; b != nullptr;) {
    Block* const next = b->next;
    block_recycler_.recycle(b);
    b = next;
  }
  segment_recycler_.recycle(segment);
}

Block* BlockStore::join(Block* low, Block* high) noexcept {
  low->size += high->size;
  low->next = high->next;
  if (high->next != nullptr) high->next->prev = low;
  block_recycler_.recycle(high);
  return low;
}

Block* BlockStore::split_at(Block* b, std::uintptr_t at) noexcept {
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

Merged BlockStore::merge_free(Block* block, std::uint64_t clock) noexcept {
  FreeBins& bins = *block->segment->bins;
  Merged merged;
  if (block->prev != nullptr && block->prev->cached) {
    Block* prev = block->prev;
    bins.remove(prev);
    merged.split_blocks -= 1;
    merged.split_bytes -= signed_size(prev->size);
    block = join(prev, block);
  }
  if (block->next != nullptr && block->next->cached) {
    Block* next = block->next;
    bins.remove(next);
    merged.split_blocks -= 1;
    merged.split_bytes -= signed_size(next->size);
    join(block, next);
  }
  block->requested_size = 0;
  block->pending_events = 0;
  block->cached_at = clock;
  if (block->shares_mapped_range()) {  // is_split() in a fixed segment
    merged.split_blocks += 1;
    merged.split_bytes += signed_size(block->size);
  }
  merged.block = block;
  return merged;
}

Snapshot BlockStore::layout() const {
  Snapshot snap;
  for (const Segment* s = segments_; s != nullptr; s = s->next) {
    // An expandable segment shows as one segment per contiguous mapped run of its blocks.
    for (const Block* b = s->first; b != nullptr;) {
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

void BlockStore::check_page_donors() const {
  std::unordered_set<const FreeBins*> donors;
  for (const PageDonors& list : page_donors_) {
    std::size_t listed = 0;
    for (const FreeBins* d = list.first; d != nullptr && listed <= list.count;
         d = d->next_donor(), ++listed) {
      if (!donors.insert(d).second)
        broken_invariant("free-bins", "free bins listed twice as page donors");
      if (&list != &page_donors_[d->small_pool() ? 0 : 1]) {
        broken_invariant("free-bins", "free bins listed as page donors of the other pool");
      }
    }
    if (listed != list.count) {
      broken_invariant("free-bins", fmt::format("{} page donors counted, {} listed (a cycle?)",
                                                list.count, listed));
    }
  }
  std::size_t found = 0;
  for (const auto& [stream, stream_pools] : pools_) {
    const StreamPools* const pools = stream_pools.get();
    for (const FreeBins* bins : {&pools->small, &pools->large}) {
      const PageDonors* want =
          lists_page_donors_ ? &page_donors_[bins->small_pool() ? 0 : 1] : nullptr;
      if (bins->donors() != want) {
        broken_invariant("free-bins",
                         fmt::format("stream {}: the {} pool's bins are not listed for page "
                                     "recycling as the setting says",
                                     stream, bins->small_pool() ? "small" : "large"));
      }
      if (donors.contains(bins) != (bins->page_blocks() > 0)) {
        broken_invariant("free-bins",
                         fmt::format("stream {}: the {} pool's bins hold {} blocks with a whole "
                                     "page but are {}a page donor",
                                     stream, bins->small_pool() ? "small" : "large",
                                     bins->page_blocks(), donors.contains(bins) ? "" : "not "));
      }
      if (bins->page_blocks() > 0) ++found;
    }
  }
  if (found != donors.size()) {
    broken_invariant("free-bins",
                     fmt::format("{} page donors listed, {} bins of live streams hold a page",
                                 donors.size(), found));
  }
}

}  // namespace memscope::detail
