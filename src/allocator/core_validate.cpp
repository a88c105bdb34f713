// AllocatorCore::validate(): every invariant of the bookkeeping, checked where it lives.
//
//   tiling       segments are linked both ways and do not overlap; each is covered, in address
//                order and without gaps, by its blocks, whose prev/next links agree; blocks are
//                512-byte aligned with non-zero sizes that are multiples of 512
//   block-state  a block is allocated, pending (freed, waiting for stream events), recent,
//                cached or (expandable segments only) unmapped, exactly one; only active blocks
//                carry a
//                requested size, never above the size; no two cached blocks are neighbours, nor
//                two unmapped ones (they would have been merged)
//   mapping      expandable segments: unmapped blocks start and end on page boundaries and are
//                listed in address order, exactly; the mapped bytes are what the blocks say;
//                the segment each stream's pool grows is one of its own
//   free-bins    the free bins hold exactly the cached blocks, each in its segment's pool, and
//                are consistent in themselves (FreeBins::audit); with expandable segments every
//                pool's bins are listed for page recycling, and the PageDonors list holds
//                exactly the bins with a block that holds a whole page, once each
//   stream-pools each stream's pools are filed under its id and count its live segments
//   front-cache  each segment's FrontCacheRoom is what its bins say for the pool's growing
//                expandable segment, closed for the other expandable ones, the default for fixed
//                ones (the free's hot path files blocks by it)
//   pointer-map  the pointer map holds exactly the allocated and recent blocks, each under its
//                address
//   recent       each stream's RecentFrees lists exactly its recent blocks, once each, and the
//                allocator's count of them is their number; none at capacity (FrontCache::bypassed)
//   pending      every pending stream event refers to a pending block of a live segment
//   statistics   every current value equals what the blocks say (Snapshot::totals of the
//                layout, the oversize counts), is not negative and is not above its peak
#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "allocator/allocator_core.hpp"
#include "allocator/invariant.hpp"
#include "allocator/size_rules.hpp"

namespace memscope {

using detail::Block;
using detail::Segment;
using detail::StreamPools;

namespace {

[[noreturn]] void broken(const char* invariant, const std::string& what) {
  detail::broken_invariant(invariant, what);
}

using detail::describe;

}  // namespace

void AllocatorCore::validate() const {
  std::vector<const Block*> all;     // every block of every segment
  std::vector<const Block*> cached;  // the cached ones, to compare with the bins' contents
  std::vector<const Block*> recent;  // the recent ones, to compare with the RecentFrees lists
  std::size_t allocated = 0;
  std::int64_t oversize_allocations = 0;
  std::int64_t oversize_segments = 0;
  const detail::PointerMap& live_map = store_.live();
  all.reserve(2 * live_map.size() + 64);  // a guess that saves most regrowth
  cached.reserve(live_map.size() + 64);
  std::unordered_map<StreamId, std::size_t> segments_of;  // live segments per stream
  std::unordered_set<const Segment*> live_segments;       // to look up without a walk per stream
  const Segment* previous_segment = nullptr;
  for (const Segment* s = store_.segments(); s != nullptr; previous_segment = s, s = s->next) {
    live_segments.insert(s);
    if (s->prev != previous_segment) broken("tiling", describe(s) + ": wrong prev link");
    if (s->first == nullptr || s->first->address != s->base || s->first->prev != nullptr) {
      broken("tiling", describe(s) + ": its first block does not start it");
    }
    const StreamPools* const pools = store_.pools_of(s->stream);
    if (pools == nullptr || pools->stream != s->stream ||
        s->bins != (s->small_pool ? &pools->small : &pools->large)) {
      broken("free-bins", describe(s) + ": its bins are not its stream's pool of its kind");
    }
    if (s->stat_pool != detail::pool_index(s->small_pool)) {
      broken("tiling", describe(s) + fmt::format(": counts in statistics pool {}", s->stat_pool));
    }
    ++segments_of[s->stream];
    if (s->size >= config_.max_split_size && !s->expandable) ++oversize_segments;
    {
      const bool grown =
          pools != nullptr && (pools->expandable_small == s || pools->expandable_large == s);
      const detail::FrontCacheRoom want =
          s->expandable ? detail::kClosedRoom : detail::FrontCacheRoom{};
      if (!grown && (s->room.limit != want.limit || s->room.next != want.next)) {
        broken("front-cache", describe(s) + fmt::format(": front-cache room {} below {:#x}",
                                                        s->room.limit, s->room.next));
      }
    }
    if (s->expandable && (s->page == 0 || s->size % s->page != 0)) {
      broken("mapping", describe(s) + ": not in whole pages");
    }
    std::size_t mapped = 0;
    const Block* listed = s->unmapped_first;  // the unmapped list, walked along the blocks
    std::uintptr_t cursor = s->base;
    std::size_t blocks = 0;
    const Block* before = nullptr;
    for (const Block* b = s->first; b != nullptr; before = b, b = b->next) {
      if (++blocks > s->size / detail::kMinBlockSize) {
        broken("tiling", describe(s) + ": more blocks than its bytes allow (a cycle?)");
      }
      all.push_back(b);
      if (b->segment != s) broken("tiling", describe(b) + ": listed in " + describe(s));
      if (b->prev != before) broken("tiling", describe(b) + ": wrong prev link");
      if (b->address != cursor) {
        broken("tiling",
               fmt::format("{}: expected at {:#x} (gap or overlap)", describe(b), cursor));
      }
      if (b->size == 0 || b->size % detail::kMinBlockSize != 0 ||
          b->address % detail::kMinBlockSize != 0) {
        broken("tiling", describe(b) + ": not 512-byte aligned or sized");
      }
      if (b->size > s->base + s->size - b->address) {
        broken("tiling", describe(b) + ": runs past the end of " + describe(s));
      }
      cursor += b->size;
      const bool pending = b->pending_events > 0;
      if (static_cast<int>(b->use.allocated) + static_cast<int>(b->cached) +
              static_cast<int>(pending) + static_cast<int>(b->unmapped) +
              static_cast<int>(b->recent) !=
          1) {
        broken("block-state",
               describe(b) + ": not exactly one of allocated, pending, recent, cached, unmapped");
      }
      if (b->recent) {
        recent.push_back(b);
        if (live_map.find(b->address) != b) {
          broken("pointer-map", describe(b) + ": recent, but not found under its address");
        }
      }
      if (b->unmapped) {
        if (!s->expandable || (b->address - s->base) % s->page != 0 || b->size % s->page != 0) {
          broken("mapping", describe(b) + ": unmapped, but not whole pages of an expandable one");
        }
        if (before != nullptr && before->unmapped) {
          broken("block-state", describe(b) + ": an unmapped neighbour was not merged");
        }
        if (b != listed || (b->bin_prev != nullptr && b->bin_prev->bin_next != b)) {
          broken("mapping", describe(b) + ": not where the unmapped list says");
        }
        listed = b->bin_next;
      } else {
        mapped += b->size;
      }
      if (b->active() ? b->requested_size > b->size : b->requested_size != 0) {
        broken("block-state", describe(b) + fmt::format(": requested size {}", b->requested_size));
      }
      if (b->cached && before != nullptr && before->cached) {
        broken("block-state", describe(b) + ": a cached neighbour was not merged");
      }
      if (b->cached) cached.push_back(b);
      // A front-cache hit on it could place an allocation where best fit would not.
      if (!s->expandable && !b->cached && b->next != nullptr && b->next->cached &&
          s->bins->count() > 1 && (b->use.slow_free & Block::kNextCached) == 0) {
        broken("block-state", describe(b) +
                                  ": its next neighbour is cached beside others, yet its free may "
                                  "take the hot path (kNextCached unset)");
      }
      if (!s->expandable && b->use.allocated && before != nullptr && before->cached &&
          (b->use.slow_free & Block::kPrevCached) == 0) {
        broken("block-state", describe(b) +
                                  ": its previous neighbour is cached, yet its free may take the "
                                  "hot path (kPrevCached unset)");
      }
      if (b->other_streams() == b->stream_uses.empty()) {
        broken("block-state", describe(b) + fmt::format(": other_streams is {} for {} streams",
                                                        b->other_streams(), b->stream_uses.size()));
      }
      if (b->use.allocated) {
        ++allocated;
        if (b->size >= config_.max_split_size) ++oversize_allocations;
        if (live_map.find(b->address) != b) {
          broken("pointer-map", describe(b) + ": not found under its address");
        }
      }
    }
    if (cursor != s->base + s->size) {
      broken("tiling", fmt::format("{}: its blocks end at {:#x}", describe(s), cursor));
    }
    if (listed != nullptr) broken("mapping", describe(s) + ": its unmapped list runs on");
    if (s->expandable && mapped != s->mapped_bytes) {
      broken("mapping", fmt::format("{}: {} bytes mapped, it counts {}", describe(s), mapped,
                                    s->mapped_bytes));
    }
  }
  const Snapshot snap = store_.layout();  // in address order; the walk above ruled out cycles
  for (std::size_t i = 1; i < snap.segments.size(); ++i) {
    const SegmentInfo& a = snap.segments[i - 1];
    if (a.address + a.total_size > snap.segments[i].address) {
      broken("tiling", fmt::format("segments at {:#x} and {:#x} overlap", a.address,
                                   snap.segments[i].address));
    }
  }
  // Every allocated block was found under its own (distinct) address, so an equal size means
  // the map holds nothing else.
  if (live_map.size() != allocated + recent.size()) {
    broken("pointer-map", fmt::format("it holds {} entries for {} allocated and {} recent blocks",
                                      live_map.size(), allocated, recent.size()));
  }

  std::vector<const Block*> in_bins;
  in_bins.reserve(cached.size());
  store_.for_each_pools([&](StreamId stream, const StreamPools& stream_pools) {
    const StreamPools* const pools = &stream_pools;
    if (pools->stream != stream) {
      broken("stream-pools",
             fmt::format("the pools filed under stream {} are not its own", stream));
    }
    const auto found = segments_of.find(stream);
    const std::size_t segments = found == segments_of.end() ? 0 : found->second;
    if (pools->segments != segments) {
      broken("stream-pools", fmt::format("stream {} counts {} segments, {} are live", stream,
                                         pools->segments, segments));
    }
    // The segment a pool grows is one of its own live expandable segments (older, full ones
    // may live on beside it until empty_cache() empties them).
    for (const Segment* growing : {pools->expandable_small, pools->expandable_large}) {
      if (growing != nullptr &&
          (!live_segments.contains(growing) || !growing->expandable || growing->stream != stream ||
           growing->small_pool != (growing == pools->expandable_small))) {
        broken("mapping", fmt::format("stream {} grows a segment that is not its own", stream));
      }
    }
    // The hot path's front-cache rooms (FrontCacheRoom): each pool's bins keep its growing
    // segment's, exactly; every other expandable segment's is closed, every fixed one's default.
    for (const bool small : {true, false}) {
      const Segment* growing = small ? pools->expandable_small : pools->expandable_large;
      const detail::FreeBins& bins = small ? pools->small : pools->large;
      const detail::FrontCacheRoom want = bins.room_now();
      if (bins.kept_room() != (growing != nullptr ? &growing->room : nullptr) ||
          (growing != nullptr &&
           (growing->room.limit != want.limit || growing->room.next != want.next))) {
        broken("front-cache", fmt::format("stream {}: the {} pool's front-cache room is not what "
                                          "its bins hold",
                                          stream, small ? "small" : "large"));
      }
    }
    for (const detail::FreeBins* bins : {&pools->small, &pools->large}) {
      const std::size_t first = in_bins.size();
      if (const auto problem = bins->audit(in_bins); problem.what != nullptr) {
        broken("free-bins", std::string(problem.what) + ": " + describe(problem.block));
      }
      for (std::size_t i = first; i < in_bins.size(); ++i) {
        if (in_bins[i]->segment == nullptr || in_bins[i]->segment->bins != bins) {
          broken("free-bins", describe(in_bins[i]) + ": in the bins of another pool or stream");
        }
      }
    }
  });
  store_.check_page_donors();
  std::vector<const Block*> listed_recent;
  store_.for_each_pools([&](StreamId stream, const StreamPools& pools) {
    front_cache_.check(pools.recent, stream, listed_recent);
  });
  std::sort(recent.begin(), recent.end());
  std::sort(listed_recent.begin(), listed_recent.end());
  if (recent != listed_recent) {
    broken("recent",
           fmt::format("{} recent blocks, {} listed", recent.size(), listed_recent.size()));
  }
  if (store_.no_pools()->recent.count != 0 || store_.no_pools()->segments != 0) {
    broken("stream-pools", "the stand-in for no cached pools holds blocks");
  }
  if (const StreamPools* last = store_.last_pools(); last != store_.no_pools()) {
    if (store_.pools_of(last->stream) != last) {
      broken("stream-pools", "the cached last-used pools are not among the live ones");
    }
  }
  std::sort(cached.begin(), cached.end());
  std::sort(in_bins.begin(), in_bins.end());
  if (in_bins != cached) {
    const auto [c, f] = std::mismatch(cached.begin(), cached.end(), in_bins.begin(), in_bins.end());
    const Block* odd = c != cached.end() && (f == in_bins.end() || *c < *f) ? *c : *f;
    broken("free-bins",
           describe(odd) + (std::binary_search(cached.begin(), cached.end(), odd)
                                ? ": cached but missing from the bins (or listed twice)"
                                : ": in the bins but not a cached block of a live segment"));
  }
  if (events_.any_pending()) {
    std::sort(all.begin(), all.end());
    events_.check(all);
  }

  // Statistics: the snapshot's rebuild is the reference (the same one users compare with).
  MemoryStats expected = snap.totals();
  // Recent blocks show as inactive blocks, but count in inactive_split only once merged.
  for (const Block* b : recent) {
    if (!b->counts_as_split(split_every_remainder_)) continue;
    const StatPool pool = b->small_pool() ? StatPool::small : StatPool::large;
    for (const auto i : {static_cast<std::size_t>(StatPool::all), static_cast<std::size_t>(pool)}) {
      expected.inactive_split[i].current -= 1;
      expected.inactive_split_bytes[i].current -= static_cast<std::int64_t>(b->size);
    }
  }
  expected.oversize_allocations.current = oversize_allocations;
  expected.oversize_segments.current = oversize_segments;
  statistics_.check(expected);

  if (front_cache_.bypassed() && !recent.empty()) {
    broken("recent", fmt::format("{} recent blocks, but at capacity (tight_) every free goes to "
                                 "the bins",
                                 recent.size()));
  }
  // Last: a broken statistic (waiting_) shows here too, and is named above as what it is.
  if (off_hot_path_ != off_hot_path_now()) {
    broken("hot-path-gate",
           fmt::format("off_hot_path_ is {:#x}; hooks, waiting blocks and settings make it {:#x}",
                       off_hot_path_, off_hot_path_now()));
  }
}

}  // namespace memscope
