// ExpandableSegments' part of AllocatorCore::validate(): the "mapping" invariant.
#include <fmt/format.h>

#include "allocator/expandable/expandable_segments.hpp"
#include "allocator/invariant.hpp"

namespace memscope::detail {

void ExpandableSegments::check_pages(const Segment& s) {
  if (s.expandable && (s.page == 0 || s.size % s.page != 0)) {
    broken_invariant("mapping", describe(&s) + ": not in whole pages");
  }
}

void ExpandableSegments::check_unmapped(const Block& b, const Block* before, const Block*& listed) {
  const Segment& s = *b.segment;
  if (!s.expandable || (b.address - s.base) % s.page != 0 || b.size % s.page != 0) {
    broken_invariant("mapping",
                     describe(&b) + ": unmapped, but not whole pages of an expandable one");
  }
  if (before != nullptr && before->unmapped) {
    broken_invariant("block-state", describe(&b) + ": an unmapped neighbour was not merged");
  }
  if (&b != listed || (b.bin_prev != nullptr && b.bin_prev->bin_next != &b)) {
    broken_invariant("mapping", describe(&b) + ": not where the unmapped list says");
  }
  listed = b.bin_next;
}

void ExpandableSegments::check_mapped(const Segment& s, const Block* listed, std::size_t mapped) {
  if (listed != nullptr) broken_invariant("mapping", describe(&s) + ": its unmapped list runs on");
  if (s.expandable && mapped != s.mapped_bytes) {
    broken_invariant("mapping", fmt::format("{}: {} bytes mapped, it counts {}", describe(&s),
                                            mapped, s.mapped_bytes));
  }
}

void ExpandableSegments::check_growing(StreamId stream, const StreamPools& pools,
                                       const std::unordered_set<const Segment*>& live) {
  // Older, full ones may live on beside it until empty_cache() empties them.
  for (const Segment* growing : {pools.expandable_small, pools.expandable_large}) {
    if (growing != nullptr &&
        (!live.contains(growing) || !growing->expandable || growing->stream != stream ||
         growing->small_pool != (growing == pools.expandable_small))) {
      broken_invariant("mapping",
                       fmt::format("stream {} grows a segment that is not its own", stream));
    }
  }
}

}  // namespace memscope::detail
