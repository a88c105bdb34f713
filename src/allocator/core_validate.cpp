// AllocatorCore::validate(): every invariant of the bookkeeping, each family checked by the
// component that owns the state; this file only calls them in order. The families, and which
// component checks each, are listed in docs/design.md ("Invariants of the allocator").
#include <algorithm>

#include "allocator/allocator_core.hpp"

namespace memscope {

void AllocatorCore::validate() const {
  // The expandable source's first: the front cache's rooms read the segment a pool grows, which
  // check_growing() has found to be live.
  detail::ExpandableChecks expandable;
  detail::FrontCacheChecks front_cache;
  detail::LayoutSummary summary = store_.check({&expandable, &front_cache}, config_.max_split_size);
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
