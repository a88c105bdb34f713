// ExpandableSegments: growth, the page map and page recycling (expandable_segments:true;
// docs/design.md).
//
// Each stream's pool grows one segment: an address range reserved from the backend, with pages
// mapped into it as needed. A miss takes the lowest-address run of free space (a cached block
// and the unmapped space after it, or unmapped space alone) that fits the request, and maps
// just the pages it lacks, so split pieces merge back and the segment stays compact.
//
// Page recycling: the pages a miss needs can come from whole free pages inside cached blocks
// elsewhere (any stream, same page size), moved by the backend without copying, instead of
// new memory. The policy (expandable_segments_recycling) says when: never (PyTorch: at the
// memory limit, flush every cached page and retry); at_limit (only the part that would pass the
// memory limit, instead of the flush; elsewhere exactly PyTorch's placement and its few map
// calls; the default: no page moves while memory is not short); above_peak (also the part that
// would lift the mapped bytes above their high-water mark since the last empty_cache(), from the
// stream's own free pages first, then from other streams' cached blocks, below the limit never
// from their front caches); always (every growth, from any stream's). Other streams' pages are
// found through the BlockStore's page donors, the bins that hold a whole free page: a growth visits
// only the streams that can give pages, not every stream. Under above_peak and always a miss is
// placed by address space (placement.cpp): what is mapped then says nothing about where a block
// goes, so those two never creep from one iteration of a training step to the next, and leave the
// least reserved on real traces, at more map calls (docs/benchmarks.md). Cached blocks are never
// pending on other streams; the backend waits for their own stream before it takes a page away.
//
// empty_cache() unmaps every whole free page, also inside partly used segments, and gives back
// the address range of a segment with nothing mapped.
//
// Statistics: reserved bytes are mapped bytes; a segment is a contiguous mapped run (what the
// snapshot shows); a cached block counts as an inactive split block when it shares its run.
#include <algorithm>
#include <vector>

#include "allocator/expandable/expandable_segments.hpp"

#include <string>

#include "allocator/poison.hpp"
#include "allocator/size_rules.hpp"
#include "memscope/errors.hpp"

namespace memscope::detail {

namespace {

void unlink_unmapped(Segment& s, Block* b) noexcept {
  if (b->bin_prev != nullptr) {
    b->bin_prev->bin_next = b->bin_next;
  } else {
    s.unmapped_first = b->bin_next;
  }
  if (b->bin_next != nullptr) b->bin_next->bin_prev = b->bin_prev;
  b->bin_prev = nullptr;
  b->bin_next = nullptr;
}

// Lists unmapped block `b` in address order, after the nearest unmapped block before it. The
// walk back is short when blocks are unmapped in address order, as empty_cache() does.
void link_unmapped(Segment& s, Block* b) noexcept {
  Block* before = b->prev;
  while (before != nullptr && !before->unmapped) before = before->prev;
  Block* after = before != nullptr ? before->bin_next : s.unmapped_first;
  b->bin_prev = before;
  b->bin_next = after;
  if (before != nullptr) {
    before->bin_next = b;
  } else {
    s.unmapped_first = b;
  }
  if (after != nullptr) after->bin_prev = b;
}

}  // namespace

ExpandableSegments::ExpandableSegments(Backend& backend, const AllocatorConfig& config,
                                       BlockStore& store, AllocatorStatistics& statistics,
                                       SourceHost& host, const std::size_t& memory_limit,
                                       bool poison)
    : backend_(backend),
      config_(config),
      store_(store),
      statistics_(statistics),
      host_(host),
      memory_limit_(memory_limit),
      poison_(poison) {
  if (!config.expandable_segments) return;
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
  small_page_ = std::max(granularity, kSmallBuffer);
  large_page_ = page != 0 ? page : small_page_;
}

void ExpandableSegments::poison(std::uintptr_t address, std::size_t size, bool on) const noexcept {
  poison_region(poison_, address, size, on);
}

void ExpandableSegments::release_at_exit(const Segment& s) noexcept {
  // The mapped runs are unmapped before the address range goes back.
  for (const Block* b = s.first; b != nullptr;) {
    if (b->unmapped) {
      b = b->next;
      continue;
    }
    const std::uintptr_t start = b->address;
    std::uintptr_t end = start;
    for (; b != nullptr && !b->unmapped; b = b->next) end = b->address + b->size;
    backend_.unmap_pages(as_pointer(start), end - start, s.page, s.stream);
  }
  poison(s.base, s.size, false);
  backend_.release_address_range(as_pointer(s.base), s.size);
}

void ExpandableSegments::count_split(const Block* b, int sign) noexcept {
  if (!b->shares_mapped_range()) return;
  const bool small = b->segment->small_pool;
  statistics_.change_split(small, sign > 0 ? 1 : -1,
                           sign > 0 ? signed_size(b->size) : -signed_size(b->size));
}

void ExpandableSegments::count_mapped(Segment* segment, std::int64_t bytes,
                                      std::int64_t ranges) noexcept {
  const bool small = segment->small_pool;
  statistics_.change_mapped(small, bytes, ranges);
  segment->mapped_bytes = static_cast<std::size_t>(signed_size(segment->mapped_bytes) + bytes);
  mapped_ = static_cast<std::size_t>(signed_size(mapped_) + bytes);
  mapped_high_water_ = std::max(mapped_high_water_, mapped_);
}

void ExpandableSegments::record_mapping(TraceAction action, std::uintptr_t address,
                                        std::size_t bytes, StreamId stream) noexcept {
  host_.record_segment_event(action, address, bytes, stream);
}

Segment* ExpandableSegments::expandable_segment(StreamPools& pools, bool small,
                                                std::size_t at_least) {
  Segment*& slot = small ? pools.expandable_small : pools.expandable_large;
  if (slot != nullptr) return slot;
  const std::size_t page = small ? small_page_ : large_page_;
  const std::size_t need = round_up(at_least, page);
  // Room for everything the limit allows, so one stream never needs a second range; smaller
  // when the address space is short, down to what this request needs. Past kFullRanges ranges
  // (thousands of streams) a new range gets the limit divided by the ranges there are, so
  // address space grows with the log of the streams, not with their number: 100,000 streams
  // times two pools times the limit exhaust any address space (the simulated device's 2^56
  // bytes at 8,192 streams of a 4 TiB device); PyTorch reserves the device's
  // memory per stream and pool and runs out at a few hundred streams. A range that fills up
  // grows on in another.
  constexpr std::size_t kFullRanges = 64;
  const std::size_t limit = std::min(memory_limit_, std::size_t{1} << 50);
  const auto ranges = static_cast<std::size_t>(statistics_.segments());
  std::size_t size = round_up(ranges < kFullRanges ? limit : limit / ranges, page);
  size = std::max(size, need);
  if (need > round_up(limit, page)) return nullptr;
  void* base = backend_.reserve_address_range(size);
  if (base == nullptr) {
    // Address space is short (RLIMIT_AS, many streams): find the largest range that still
    // fits, then take an eighth of it, so the streams after this one find room too (a pool
    // whose range fills up grows on in another).
    while (base == nullptr && size > need) {
      size = std::max(need, round_up(size / 2, page));
      base = backend_.reserve_address_range(size);
    }
    const std::size_t share = std::max(need, round_up(size / 8, page));
    if (base != nullptr && share < size) {
      backend_.release_address_range(base, size);
      size = share;
      base = backend_.reserve_address_range(size);
    }
  }
  if (base == nullptr) return nullptr;
  Segment* segment = store_.add_segment(pools, small, base, size);
  segment->expandable = true;
  segment->page = page;
  segment->first->unmapped = true;  // one unmapped block covers the range
  link_unmapped(*segment, segment->first);
  segment->room = kClosedRoom;  // until its bins keep it, now
  set_growing(pools, small, segment);
  return segment;
}

void ExpandableSegments::set_growing(StreamPools& pools, bool small, Segment* segment) noexcept {
  (small ? pools.expandable_small : pools.expandable_large) = segment;
  (small ? pools.small : pools.large).keep_room(segment != nullptr ? &segment->room : nullptr);
}

Block* ExpandableSegments::map_front(Block* u, std::size_t bytes) {
  Segment& s = *u->segment;
  // Cached neighbours are merged with the new pages: take them out of the count first (whether
  // they count as split depends on their neighbours, which are about to change).
  Block* left = u->prev != nullptr && u->prev->cached ? u->prev : nullptr;
  Block* right = bytes == u->size && u->next != nullptr && u->next->cached ? u->next : nullptr;
  if (left != nullptr) count_split(left, -1);
  if (right != nullptr) count_split(right, -1);
  Block* m = u;
  if (bytes < u->size) {
    m = store_.acquire_block();  // the caller prepared it
    m->address = u->address;
    m->size = bytes;
    m->segment = &s;
    m->prev = u->prev;
    m->next = u;
    if (u->prev != nullptr) {
      u->prev->next = m;
    } else {
      s.first = m;
    }
    u->prev = m;
    u->address += bytes;
    u->size -= bytes;
  } else {
    unlink_unmapped(s, u);
    u->unmapped = false;
  }
  const int runs_joined = static_cast<int>(m->prev != nullptr && !m->prev->unmapped) +
                          static_cast<int>(m->next != nullptr && !m->next->unmapped);
  count_mapped(&s, signed_size(bytes), 1 - runs_joined);
  m->cached_at = statistics_.clock();
  Block* merged = m;
  if (left != nullptr) {
    s.bins->remove(left);
    merged = store_.join(left, m);
    merged->cached_at = statistics_.clock();
  }
  if (right != nullptr) {
    s.bins->remove(right);
    store_.join(merged, right);
  }
  s.bins->insert(merged);
  count_split(merged, +1);
  poison(merged->address, merged->size);
  return merged;
}

void ExpandableSegments::unmapped_inside(Block* c, std::uintptr_t address,
                                         std::size_t bytes) noexcept {
  Segment& s = *c->segment;
  count_split(c, -1);
  s.bins->remove(c);
  const std::uintptr_t end = c->address + c->size;
  Block* head = nullptr;
  Block* tail = nullptr;
  if (address + bytes < end) {
    tail = store_.split_at(c, address + bytes);  // the caller prepared two
  }
  Block* mid = c;
  if (address > c->address) {
    mid = store_.split_at(c, address);
    head = c;
  }
  mid->unmapped = true;
  mid->requested_size = 0;
  const int runs_split = static_cast<int>(mid->prev != nullptr && !mid->prev->unmapped) +
                         static_cast<int>(mid->next != nullptr && !mid->next->unmapped);
  count_mapped(&s, -signed_size(bytes), runs_split - 1);
  if (mid->prev != nullptr && mid->prev->unmapped) {
    mid = store_.join(mid->prev, mid);
  } else {
    link_unmapped(s, mid);
  }
  if (mid->next != nullptr && mid->next->unmapped) join_unmapped(mid, mid->next);
  for (Block* piece : {head, tail}) {
    if (piece == nullptr) continue;
    piece->cached_at = statistics_.clock();
    s.bins->insert(piece);
    count_split(piece, +1);
  }
}

Block* ExpandableSegments::split_unmapped(Block* u, std::uintptr_t at) noexcept {
  Block* upper = store_.split_at(u, at);  // the caller prepared it
  upper->unmapped = true;
  upper->requested_size = 0;
  link_unmapped(*u->segment, upper);  // right after u
  return upper;
}

void ExpandableSegments::join_unmapped(Block* u, Block* upper) noexcept {
  unlink_unmapped(*u->segment, upper);
  store_.join(u, upper);
}

std::size_t ExpandableSegments::unmap_free_pages(Block* c, std::uintptr_t below) {
  const Segment& s = *c->segment;
  const std::uintptr_t from = page_up(s, c->address);
  const std::uintptr_t to = std::min(page_down(s, c->address + c->size), below);
  if (from >= to) return 0;
  store_.prepare(2);
  backend_.unmap_pages(as_pointer(from), to - from, s.page, s.stream);
  statistics_.count_device_free();
  record_mapping(TraceAction::segment_unmap, from, to - from, s.stream);
  poison(from, to - from, false);  // a later mapping is judged afresh
  unmapped_inside(c, from, to - from);
  return to - from;
}

std::size_t ExpandableSegments::gather_free_pages(const FreeBins& bins, const Segment& s,
                                                  const std::vector<Block*>& growing,
                                                  const Block* last, std::uintptr_t needed_end,
                                                  std::vector<FreePages>& out) {
  ++bins_searched_for_pages_;
  std::size_t bytes = 0;
  bins.for_each(s.page, [&](Block* c) {
    const Segment& cs = *c->segment;
    if (!cs.expandable || cs.page != s.page) return;
    if (c->next != nullptr && c->next->unmapped &&
        std::find(growing.begin(), growing.end(), c->next) != growing.end()) {
      return;
    }
    std::uintptr_t from = page_up(cs, c->address);
    if (c == last) from = std::max(from, page_up(cs, needed_end));
    const std::uintptr_t to = page_down(cs, c->address + c->size);
    if (from < to) {
      out.push_back({c, from, to});
      bytes += to - from;
    }
  });
  return bytes;
}

std::vector<ExpandableSegments::FreePages> ExpandableSegments::recycling_sources(
    const Segment& s, const std::vector<Block*>& growing, const Block* last,
    std::uintptr_t needed_end, Donors donors, std::size_t wanted) {
  std::vector<FreePages> sources;
  const auto highest_first = [](auto from, auto to) {
    // Highest addresses first: memory gathers at the low ends of the segments.
    std::sort(from, to, [](const FreePages& a, const FreePages& b) { return a.from > b.from; });
  };
  const StreamPools* const mine = store_.pools_of(s.stream);
  std::size_t found = 0;
  if (mine != nullptr) {
    for (const FreeBins* bins : {&mine->small, &mine->large}) {
      found += gather_free_pages(*bins, s, growing, last, needed_end, sources);
    }
  }
  if (donors == Donors::own_stream_first) {
    highest_first(sources.begin(), sources.end());
    if (found >= wanted) return sources;
  }
  const std::size_t others = sources.size();
  // Only the bins that hold a whole page, of this page size: never every stream's.
  for (const bool small : {true, false}) {
    if ((small ? small_page_ : large_page_) != s.page) continue;
    for (const FreeBins* d = store_.page_donors(small).first; d != nullptr; d = d->next_donor()) {
      if (mine != nullptr && (d == &mine->small || d == &mine->large)) continue;
      found += gather_free_pages(*d, s, growing, last, needed_end, sources);
      if (donors == Donors::own_stream_first && found >= wanted) break;
    }
    if (donors == Donors::own_stream_first && found >= wanted) break;
  }
  highest_first(sources.begin() +
                    (donors == Donors::own_stream_first ? static_cast<std::ptrdiff_t>(others) : 0),
                sources.end());
  return sources;
}

std::size_t ExpandableSegments::recycle_into(Block* u, std::size_t bytes,
                                             std::vector<FreePages>& sources, Block*& merged) {
  const std::size_t page = u->segment->page;
  std::size_t moved = 0;
  for (FreePages& src : sources) {
    while (moved < bytes && src.to > src.from && u != nullptr && u->unmapped) {
      const std::size_t chunk = std::min({src.to - src.from, bytes - moved, u->size});
      const std::uintptr_t from = src.to - chunk;
      const std::uintptr_t to = u->address;
      const StreamId stream = src.block->segment->stream;
      store_.prepare(3);
      if (!backend_.move_pages(as_pointer(from), as_pointer(to), chunk, page, stream)) {
        backend_.unmap_pages(as_pointer(from), chunk, page, stream);
        statistics_.count_device_free();
        record_mapping(TraceAction::segment_unmap, from, chunk, stream);
        unmapped_inside(src.block, from, chunk);
        if (!backend_.map_pages(as_pointer(to), chunk, page)) return moved;
        statistics_.count_device_alloc();
        record_mapping(TraceAction::segment_map, to, chunk, u->segment->stream);
      } else {
        statistics_.count_device_free();
        statistics_.count_device_alloc();
        record_mapping(TraceAction::segment_unmap, from, chunk, stream);
        record_mapping(TraceAction::segment_map, to, chunk, u->segment->stream);
        unmapped_inside(src.block, from, chunk);
      }
      poison(from, chunk, false);
      src.to = from;
      moved += chunk;
      Block* const rest = chunk < u->size ? u : nullptr;
      merged = map_front(u, chunk);
      u = rest;
    }
    if (moved == bytes || u == nullptr) break;
  }
  return moved;
}

void ExpandableSegments::lowest_run(const Segment& s, std::size_t rounded, Block*& start,
                                    Block*& last) noexcept {
  // An unmapped block, with the cached block before it when there is one, and what follows
  // while it is cached or unmapped.
  start = nullptr;
  last = nullptr;
  for (Block* u = s.unmapped_first; u != nullptr && start == nullptr; u = u->bin_next) {
    Block* c = u->prev != nullptr && u->prev->cached && u->prev->size < rounded ? u->prev : u;
    std::size_t bytes = 0;
    for (Block* b = c; b != nullptr && bytes < rounded && (b->cached || b->unmapped); b = b->next) {
      bytes += b->size;
      last = b;
    }
    if (bytes >= rounded) start = c;
  }
}

Segment* ExpandableSegments::run_to_grow(StreamPools& pools, bool small, std::size_t rounded,
                                         Block*& start, Block*& last) {
  Segment* s = expandable_segment(pools, small, rounded);
  if (s == nullptr) return nullptr;
  lowest_run(*s, rounded, start, last);
  if (start != nullptr) return s;
  // The range is full: it was reserved under a lower memory limit (set_memory_limit raised
  // it since) or cut short when address space was scarce. The stream's pool grows on in a
  // new range; the old one keeps its blocks and goes back once empty_cache() empties it.
  set_growing(pools, small, nullptr);
  s = expandable_segment(pools, small, rounded);
  if (s == nullptr) return nullptr;
  lowest_run(*s, rounded, start, last);
  return start != nullptr ? s : nullptr;
}

std::size_t ExpandableSegments::bytes_to_recycle(std::size_t to_map,
                                                 std::size_t page) const noexcept {
  std::size_t recycle = 0;
  switch (config_.page_recycling) {
    case AllocatorConfig::PageRecycling::never:
    case AllocatorConfig::PageRecycling::at_limit:  // below, as every recycling policy does
      break;
    case AllocatorConfig::PageRecycling::above_peak:
      if (mapped_ + to_map > mapped_high_water_) {
        recycle = std::min(to_map, mapped_ + to_map - mapped_high_water_);
      }
      break;
    case AllocatorConfig::PageRecycling::always:
      recycle = to_map;
      break;
  }
  if (config_.page_recycling != AllocatorConfig::PageRecycling::never &&
      mapped_ + to_map > memory_limit_) {
    recycle = std::max(recycle, std::min(to_map, mapped_ + to_map - memory_limit_));
  }
  return std::min(to_map, round_up(recycle, page));
}

Block* ExpandableSegments::grow(StreamPools& pools, bool small, std::size_t rounded) {
  Block* start = nullptr;
  Block* last = nullptr;
  Segment* s = run_to_grow(pools, small, rounded, start, last);
  if (s == nullptr) return nullptr;
  return grow_run(s, start, last, rounded);
}

Block* ExpandableSegments::grow_run(Segment* s, Block* start, Block* last, std::size_t rounded) {
  const std::size_t page = s->page;
  // What the run lacks: whole pages at the front of its unmapped blocks.
  struct Piece {
    Block* unmapped;
    std::size_t bytes;
  };
  std::vector<Piece> plan;      // stays valid: mapping one piece merges only cached blocks
  std::vector<Block*> growing;  // the plan's unmapped blocks
  std::size_t to_map = 0;
  std::size_t remaining = rounded;
  for (Block* b = start; remaining > 0; b = b->next) {
    const std::size_t take = b->cached ? b->size : std::min(b->size, round_up(remaining, page));
    if (!b->cached) {
      plan.push_back({b, take});
      growing.push_back(b);
      to_map += take;
    }
    remaining -= std::min(remaining, take);
  }
  std::size_t recycle = bytes_to_recycle(to_map, page);
  const std::uintptr_t run_start = start->address;
  std::vector<FreePages> sources;
  std::vector<Segment*> donors;  // the other ranges the sources lie in
  if (recycle > 0) {
    // At the limit (and under `always`) free pages of every stream count alike; those of other
    // streams may wait in their front caches (the slow path flushed only this stream's): into
    // the bins first, where recycling looks. Below the limit `above_peak` takes the stream's
    // own free pages first, then, for what they do not cover, other streams' cached ones (only
    // the bins: a stream's front cache keeps what it freed a moment ago). Other streams are
    // found through page_donors_, so a growth visits the bins that hold a free page, not every
    // stream's: a walk over every stream at every growth made growth quadratic in the streams.
    const bool every_stream = mapped_ + to_map > memory_limit_ ||
                              config_.page_recycling == AllocatorConfig::PageRecycling::always;
    if (every_stream) host_.flush_front_caches();
    sources =
        recycling_sources(*s, growing, last, run_start + rounded,
                          every_stream ? Donors::every_stream : Donors::own_stream_first, recycle);
    for (const FreePages& src : sources) {
      if (src.block->segment != s) donors.push_back(src.block->segment);
    }
    std::sort(donors.begin(), donors.end());
    donors.erase(std::unique(donors.begin(), donors.end()), donors.end());
  }

  // Every piece merges with the cached space before it, so the last merge holds the whole run.
  Block* merged = nullptr;
  for (const Piece& piece : plan) {
    Block* u = piece.unmapped;
    std::size_t want = piece.bytes;
    if (recycle > 0) {
      const std::size_t asked = std::min(recycle, want);
      const std::size_t moved = recycle_into(u, asked, sources, merged);
      recycle = moved < asked ? 0 : recycle - moved;  // fewer than asked: no free pages left
      want -= moved;
    }
    if (want == 0) continue;
    if (mapped_ + want > memory_limit_) return nullptr;
    store_.prepare(1);
    if (!backend_.map_pages(as_pointer(u->address), want, page)) return nullptr;
    statistics_.count_device_alloc();
    record_mapping(TraceAction::segment_map, u->address, want, s->stream);
    merged = map_front(u, want);
  }
  if (merged == nullptr || merged->address > run_start || merged->size < rounded) {
    return nullptr;  // not reached: the plan covered the request
  }
  s->bins->remove(merged);
  if (!donors.empty()) release_emptied_donors(donors);
  return merged;
}

void ExpandableSegments::release_emptied_donors(const std::vector<Segment*>& donors) noexcept {
  // A range with nothing mapped holds no block but one unmapped one. Kept, its stream's pools
  // stayed, and every later recycling walked them: 20,000 streams at a 64 MiB limit took 26 s.
  // Its stream reserves a new range if it allocates again (where its pages would
  // have gone in the old one: at the start).
  // Only the donors' own streams' pools are looked at: a walk over every stream's at each
  // release made growth quadratic in the streams again.
  for (Segment* d : donors) {
    if (d->mapped_bytes == 0) {
      const StreamId stream = d->stream;
      release_expandable_segment(d);
      store_.drop_pools_if_unused(stream);
    }
  }
}

std::size_t ExpandableSegments::release_cached() {
  std::size_t released = 0;
  std::vector<Block*> cached;
  for (Segment* s = store_.segments(); s != nullptr;) {
    Segment* const next = s->next;
    if (s->expandable) {
      cached.clear();
      // Unmapping one cached block never merges or frees another, so these stay valid.
      for (Block* b = s->first; b != nullptr; b = b->next) {
        if (b->cached) cached.push_back(b);
      }
      for (Block* b : cached) released += unmap_free_pages(b);
      if (s->mapped_bytes == 0) release_expandable_segment(s);
    }
    s = next;
  }
  return released;
}

void ExpandableSegments::release_expandable_segment(Segment* segment) noexcept {
  // Nothing mapped: one unmapped block covers the range.
  poison(segment->base, segment->size, false);
  backend_.release_address_range(as_pointer(segment->base), segment->size);
  if (StreamPools* p = store_.pools_of(segment->stream); p != nullptr) {
    if (p->expandable_small == segment) set_growing(*p, true, nullptr);
    if (p->expandable_large == segment) set_growing(*p, false, nullptr);
  }
  store_.forget_segment(segment);  // and its blocks
}

}  // namespace memscope::detail
