// BlockStore::check(): the invariants of the blocks, segments, pointer map and pools (listed in
// block_store.hpp), checked in one walk; the front cache and the expandable source check their
// parts through LayoutChecks as the walk reaches them.
#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "allocator/allocator_statistics.hpp"
#include "allocator/block_store.hpp"
#include "allocator/invariant.hpp"
#include "allocator/size_rules.hpp"

namespace memscope::detail {

LayoutSummary BlockStore::check(std::initializer_list<LayoutChecks*> checks,
                                std::size_t max_split_size) const {
  LayoutSummary out;
  std::size_t allocated = 0;
  out.all.reserve(2 * live_.size() + 64);  // a guess that saves most regrowth
  out.cached.reserve(live_.size() + 64);
  std::unordered_map<StreamId, std::size_t> segments_of;  // live segments per stream
  std::unordered_set<const Segment*> live_segments;       // to look up without a walk per stream
  const Segment* previous_segment = nullptr;
  for (const Segment* s = segments_; s != nullptr; previous_segment = s, s = s->next) {
    live_segments.insert(s);
    if (s->prev != previous_segment) broken_invariant("tiling", describe(s) + ": wrong prev link");
    if (s->first == nullptr || s->first->address != s->base || s->first->prev != nullptr) {
      broken_invariant("tiling", describe(s) + ": its first block does not start it");
    }
    const StreamPools* const pools = pools_of(s->stream);
    if (pools == nullptr || pools->stream != s->stream ||
        s->bins != (s->small_pool ? &pools->small : &pools->large)) {
      broken_invariant("free-bins",
                       describe(s) + ": its bins are not its stream's pool of its kind");
    }
    if (s->stat_pool != pool_index(s->small_pool)) {
      broken_invariant("tiling",
                       describe(s) + fmt::format(": counts in statistics pool {}", s->stat_pool));
    }
    ++segments_of[s->stream];
    if (s->size >= max_split_size && !s->expandable) ++out.oversize_segments;
    for (LayoutChecks* c : checks) c->segment(*s, pools);
    std::size_t mapped = 0;
    std::uintptr_t cursor = s->base;
    std::size_t blocks = 0;
    const Block* before = nullptr;
    for (const Block* b = s->first; b != nullptr; before = b, b = b->next) {
      if (++blocks > s->size / kMinBlockSize) {
        broken_invariant("tiling", describe(s) + ": more blocks than its bytes allow (a cycle?)");
      }
      out.all.push_back(b);
      if (b->segment != s) broken_invariant("tiling", describe(b) + ": listed in " + describe(s));
      if (b->prev != before) broken_invariant("tiling", describe(b) + ": wrong prev link");
      if (b->address != cursor) {
        broken_invariant(
            "tiling", fmt::format("{}: expected at {:#x} (gap or overlap)", describe(b), cursor));
      }
      if (b->size == 0 || b->size % kMinBlockSize != 0 || b->address % kMinBlockSize != 0) {
        broken_invariant("tiling", describe(b) + ": not 512-byte aligned or sized");
      }
      if (b->size > s->base + s->size - b->address) {
        broken_invariant("tiling", describe(b) + ": runs past the end of " + describe(s));
      }
      cursor += b->size;
      const bool pending = b->pending_events > 0;
      if (static_cast<int>(b->use.allocated) + static_cast<int>(b->cached) +
              static_cast<int>(pending) + static_cast<int>(b->unmapped) +
              static_cast<int>(b->recent) !=
          1) {
        broken_invariant("block-state", describe(b) +
                                            ": not exactly one of allocated, pending, "
                                            "recent, cached, unmapped");
      }
      if (b->recent) {
        out.recent.push_back(b);
        if (live_.find(b->address) != b) {
          broken_invariant("pointer-map",
                           describe(b) + ": recent, but not found under its address");
        }
      }
      if (b->unmapped) {
        for (LayoutChecks* c : checks) c->unmapped_block(*b, before);
      } else {
        mapped += b->size;
      }
      if (b->active() ? b->requested_size > b->size : b->requested_size != 0) {
        broken_invariant("block-state",
                         describe(b) + fmt::format(": requested size {}", b->requested_size));
      }
      if (b->cached && before != nullptr && before->cached) {
        broken_invariant("block-state", describe(b) + ": a cached neighbour was not merged");
      }
      if (b->cached) out.cached.push_back(b);
      for (const LayoutChecks* c : checks) c->block(*b, before);
      if (b->other_streams() == b->stream_uses.empty()) {
        broken_invariant("block-state",
                         describe(b) + fmt::format(": other_streams is {} for {} streams",
                                                   b->other_streams(), b->stream_uses.size()));
      }
      if (b->use.allocated) {
        ++allocated;
        if (b->size >= max_split_size) ++out.oversize_allocations;
        if (live_.find(b->address) != b) {
          broken_invariant("pointer-map", describe(b) + ": not found under its address");
        }
      }
    }
    if (cursor != s->base + s->size) {
      broken_invariant("tiling", fmt::format("{}: its blocks end at {:#x}", describe(s), cursor));
    }
    for (LayoutChecks* c : checks) c->segment_end(*s, mapped);
  }
  out.layout = layout();  // in address order; the walk above ruled out cycles
  for (std::size_t i = 1; i < out.layout.segments.size(); ++i) {
    const SegmentInfo& a = out.layout.segments[i - 1];
    if (a.address + a.total_size > out.layout.segments[i].address) {
      broken_invariant("tiling", fmt::format("segments at {:#x} and {:#x} overlap", a.address,
                                             out.layout.segments[i].address));
    }
  }
  // Every allocated block was found under its own (distinct) address, so an equal size means
  // the map holds nothing else.
  if (live_.size() != allocated + out.recent.size()) {
    broken_invariant("pointer-map",
                     fmt::format("it holds {} entries for {} allocated and {} recent blocks",
                                 live_.size(), allocated, out.recent.size()));
  }

  out.in_bins.reserve(out.cached.size());
  for (const auto& [stream, stream_pools] : pools_) {
    const StreamPools* const pools = stream_pools.get();
    if (pools == nullptr || pools->stream != stream) {
      broken_invariant("stream-pools",
                       fmt::format("the pools filed under stream {} are not its own", stream));
    }
    const auto found = segments_of.find(stream);
    const std::size_t segments = found == segments_of.end() ? 0 : found->second;
    if (pools->segments != segments) {
      broken_invariant("stream-pools", fmt::format("stream {} counts {} segments, {} are live",
                                                   stream, pools->segments, segments));
    }
    for (const LayoutChecks* c : checks) c->pools(stream, *pools, live_segments);
    for (const FreeBins* bins : {&pools->small, &pools->large}) {
      const std::size_t first = out.in_bins.size();
      if (const auto problem = bins->audit(out.in_bins); problem.what != nullptr) {
        broken_invariant("free-bins", std::string(problem.what) + ": " + describe(problem.block));
      }
      for (std::size_t i = first; i < out.in_bins.size(); ++i) {
        if (out.in_bins[i]->segment == nullptr || out.in_bins[i]->segment->bins != bins) {
          broken_invariant("free-bins",
                           describe(out.in_bins[i]) + ": in the bins of another pool or stream");
        }
      }
    }
  }
  check_page_donors();
  return out;
}

MemoryStats LayoutSummary::expected_statistics(bool split_every_remainder) const {
  MemoryStats expected = layout.totals();
  for (const Block* b : recent) {
    if (!b->counts_as_split(split_every_remainder)) continue;
    for (const std::size_t i : {kAllPools, pool_index(b->small_pool())}) {
      expected.inactive_split[i].current -= 1;
      expected.inactive_split_bytes[i].current -= signed_size(b->size);
    }
  }
  expected.oversize_allocations.current = oversize_allocations;
  expected.oversize_segments.current = oversize_segments;
  return expected;
}

void BlockStore::check_bins_hold_cached(LayoutSummary& summary) const {
  if (no_pools_.recent.count != 0 || no_pools_.segments != 0) {
    broken_invariant("stream-pools", "the stand-in for no cached pools holds blocks");
  }
  if (last_pools_ != &no_pools_ && pools_of(last_pools_->stream) != last_pools_) {
    broken_invariant("stream-pools", "the cached last-used pools are not among the live ones");
  }
  std::vector<const Block*>& cached = summary.cached;
  std::vector<const Block*>& in_bins = summary.in_bins;
  std::sort(cached.begin(), cached.end());
  std::sort(in_bins.begin(), in_bins.end());
  if (in_bins != cached) {
    const auto [c, f] = std::mismatch(cached.begin(), cached.end(), in_bins.begin(), in_bins.end());
    const Block* odd = c != cached.end() && (f == in_bins.end() || *c < *f) ? *c : *f;
    broken_invariant(
        "free-bins",
        describe(odd) + (std::binary_search(cached.begin(), cached.end(), odd)
                             ? ": cached but missing from the bins (or listed twice)"
                             : ": in the bins but not a cached block of a live segment"));
  }
}

}  // namespace memscope::detail
