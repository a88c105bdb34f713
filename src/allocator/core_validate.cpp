// AllocatorCore::validate(): every invariant of the bookkeeping, each family checked by the
// component that owns the state; this file only calls them in order. The families, and which
// component checks each, are listed in docs/design.md ("Invariants of the allocator").
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
  statistics_.check(summary.expected_statistics(rules_.split_every_remainder));

  // Last: a broken statistic (waiting_) shows here too, and is named above as what it is.
  Gate::check(off_hot_path_, off_hot_path_now());
}

}  // namespace memscope
