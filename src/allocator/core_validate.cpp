// AllocatorCore::validate(): every invariant of the bookkeeping, each family checked by the
// component that owns the state (in parentheses); this file only calls them in order.
//
//   tiling       (BlockStore::check) segments are linked both ways and do not overlap; each is
//   covered, in address
//                order and without gaps, by its blocks, whose prev/next links agree; blocks are
//                512-byte aligned with non-zero sizes that are multiples of 512
//   block-state  (BlockStore::check; FrontCache::check_marks) a block is allocated, pending (freed,
//   waiting for stream events), recent,
//                cached or (expandable segments only) unmapped, exactly one; only active blocks
//                carry a requested size, never above the size; no two cached blocks are neighbours,
//                nor two unmapped ones (they would have been merged)
//   mapping      (ExpandableSegments::check_*) expandable segments: unmapped blocks start and end
//   on page boundaries and are
//                listed in address order, exactly; the mapped bytes are what the blocks say;
//                the segment each stream's pool grows is one of its own
//   free-bins    (BlockStore::check, check_bins_hold_cached, check_page_donors) the free bins hold
//   exactly the cached blocks, each in its segment's pool, and
//                are consistent in themselves (FreeBins::audit); with expandable segments every
//                pool's bins are listed for page recycling, and the PageDonors list holds
//                exactly the bins with a block that holds a whole page, once each
//   stream-pools (BlockStore) each stream's pools are filed under its id and count its live
//   segments front-cache  (FrontCache::check_room, check_rooms) each segment's FrontCacheRoom is
//   what its bins say for the pool's growing
//                expandable segment, closed for the other expandable ones, the default for fixed
//                ones (the free's hot path files blocks by it)
//   pointer-map  (BlockStore::check) the pointer map holds exactly the allocated and recent blocks,
//   each under its
//                address
//   recent       (FrontCache::check) each stream's RecentFrees lists exactly its
//   recent blocks, once each, and the
//                allocator's count of them is their number; none at capacity (FrontCache::bypassed)
//   pending      (StreamEvents::check) every pending stream event refers to a pending block of a
//   live segment statistics   (AllocatorStatistics::check) every current value equals what the
//   blocks say (Snapshot::totals of the
//                layout, the oversize counts), is not negative and is not above its peak
#include <algorithm>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "allocator/allocator_core.hpp"
#include "allocator/invariant.hpp"

namespace memscope {

using detail::Block;
using detail::Segment;
using detail::StreamPools;

namespace {

// The front cache's and the expandable source's checks, as the block store's walk reaches
// what they own.
class ComponentChecks final : public detail::LayoutChecks {
 public:
  void segment(const Segment& s, const StreamPools* pools) override {
    detail::FrontCache::check_room(s, pools);
    detail::ExpandableSegments::check_pages(s);
    listed_ = s.unmapped_first;
  }
  void unmapped_block(const Block& b, const Block* before) override {
    detail::ExpandableSegments::check_unmapped(b, before, listed_);
  }
  void block(const Block& b, const Block* before) const override {
    detail::FrontCache::check_marks(b, before);
  }
  void segment_end(const Segment& s, std::size_t mapped) override {
    detail::ExpandableSegments::check_mapped(s, listed_, mapped);
  }
  void pools(StreamId stream, const StreamPools& pools,
             const std::unordered_set<const Segment*>& live) const override {
    detail::ExpandableSegments::check_growing(stream, pools, live);
    detail::FrontCache::check_rooms(stream, pools);
  }

 private:
  const Block* listed_ = nullptr;  // where the segment's unmapped list is, walked with it
};

}  // namespace

void AllocatorCore::validate() const {
  ComponentChecks checks;
  detail::LayoutSummary summary = store_.check(checks, config_.max_split_size);
  front_cache_.check(store_, summary.recent);
  store_.check_bins_hold_cached(summary);
  if (events_.any_pending()) {
    std::sort(summary.all.begin(), summary.all.end());
    events_.check(summary.all);
  }
  // The snapshot's rebuild is the reference (the same one users compare with).
  statistics_.check(summary.expected_statistics(split_every_remainder_));

  // Last: a broken statistic (waiting_) shows here too, and is named above as what it is.
  check_hot_path_gate(off_hot_path_, off_hot_path_now());
}

void AllocatorCore::check_hot_path_gate(unsigned gate, unsigned derived) {
  if (gate != derived) {
    detail::broken_invariant(
        "hot-path-gate",
        fmt::format("off_hot_path_ is {:#x}; hooks, waiting blocks and settings make it {:#x}",
                    gate, derived));
  }
}

}  // namespace memscope
