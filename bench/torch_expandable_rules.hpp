// PyTorch's CUDA caching-allocator placement with `expandable_segments:True`, re-implemented only
// to measure against (the rules of c10/cuda/CUDACachingAllocator.cpp as read there; our own code).
//
// One expandable segment per (stream, pool): an address range into which whole pages are mapped
// as it grows, 2 MiB pages for the small pool (blocks up to 1 MiB) and 20 MiB pages for the large
// pool. Requests are rounded up to 512 bytes. Then, per allocation:
//   1. Best fit among the mapped free blocks of the pool, from a set ordered by (stream, size,
//      address): ties go to the LOWEST ADDRESS. PyTorch ranks the free block just below the
//      unmapped tail by the size it could grow to (its own plus the whole unmapped rest), so that
//      block is taken only when no other free block of the stream is large enough
//      (`ExpandableRules::tail_ranks_by_growth`).
//   2. On a miss, the segment grows: the lowest-address unmapped block, together with the free
//      block just before it if any, is extended by mapping whole pages until it covers the request
//      (one map_block call, ceil(missing / page) pages).
//   3. The block found is split when at least 512 bytes would remain, in both pools (PyTorch's
//      should_split under expandable segments; the default rules keep large remainders of 1 MiB
//      or less unsplit): the allocation takes the low part.
//   4. A freed block merges with its free neighbours.
// Pages are unmapped only by empty_cache() or out of memory; neither happens in a replay here, so
// the model never unmaps: the mapped part of each segment is a prefix of its range and the only
// unmapped block is the tail. reserved = mapped bytes.
//
// Bench and test code only: the product's allocator is src/allocator. Not thread-safe.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <iterator>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "memscope/trace.hpp"
#include "memscope/units.hpp"
#include "torch_rules.hpp"  // TieBreak

namespace memscope::bench {

// The rules that can be switched off, to measure what each one is worth.
struct ExpandableRules {
  std::size_t small_page = 2 * MiB;
  std::size_t large_page = 20 * MiB;
  bool tail_ranks_by_growth = true;  // step 1's exception for the block before the unmapped tail
  bool split_any_remainder = true;   // step 3; false: the default rules' split condition
  TieBreak tie = TieBreak::lowest_address;  // step 1 among equal sizes (memscope: most_recent)
};

struct TorchExpandableResult {
  std::size_t peak_reserved = 0;   // mapped bytes
  std::size_t peak_allocated = 0;  // rounded block sizes
  std::size_t peak_requested = 0;
  std::size_t segments = 0;                  // expandable segments (address ranges) created
  std::size_t map_calls = 0;                 // map_block calls: PyTorch's num_device_alloc
  std::size_t pages_mapped = 0;              // pages: cuMemCreate + cuMemMap calls
  std::size_t cache_hits = 0;                // allocations served by a mapped free block
  std::vector<std::size_t> reserved_series;  // reserved bytes after each op
  // Each allocation's offset from the start of its segment's range, in the order of the ops.
  std::vector<std::uint64_t> offsets;
};

class TorchExpandableReplayer {
 public:
  explicit TorchExpandableReplayer(ExpandableRules rules = {}) : rules_(rules) {}

  [[nodiscard]] TorchExpandableResult run(const ReplayPlan& plan) {
    result_.reserved_series.reserve(plan.ops.size());
    for (const ReplayOp& op : plan.ops) step(op);
    return result_;
  }

  // One op of a plan (allocations are named by op.addr); the result so far.
  void step(const ReplayOp& op) {
    if (op.is_free) {
      const auto it = live_.find(op.addr);
      if (it == live_.end()) throw std::logic_error("torch expandable: free of a block not live");
      release(it->second);
      live_.erase(it);
    } else {
      Block* b = allocate(op.size, op.stream);
      live_[op.addr] = b;
      result_.offsets.push_back(b->address - b->segment->start);
    }
    result_.reserved_series.push_back(reserved_);
  }
  [[nodiscard]] const TorchExpandableResult& result() const noexcept { return result_; }
  [[nodiscard]] std::size_t allocated_bytes() const noexcept { return allocated_; }  // now
  [[nodiscard]] std::size_t reserved_bytes() const noexcept { return reserved_; }    // now
  // Frees what a run left live, lowest recorded address first, so the plan can run again on
  // the cache it left (the next iteration of a training loop).
  void release_all() {
    std::map<std::uint64_t, Block*> in_order(live_.begin(), live_.end());
    for (const auto& [addr, block] : in_order) release(block);
    live_.clear();
  }

  // The model's own bookkeeping, checked from scratch (tests): each segment's blocks tile its
  // mapped part exactly, which is whole pages; no two free blocks are neighbours; the free sets
  // hold exactly the free blocks; reserved and allocated bytes add up. Throws std::logic_error.
  void check_invariants() const {
    std::size_t mapped = 0;
    std::size_t allocated = 0;
    std::size_t free_blocks = 0;
    for (const Segment& s : segment_storage_) {
      const std::size_t page = s.small ? rules_.small_page : rules_.large_page;
      const std::uint64_t length = s.mapped_end - s.start;
      if (length % page != 0) fail("mapped part not whole pages");
      mapped += length;
      if (length == 0) continue;
      const Block* b = s.last;
      std::uint64_t end = s.mapped_end;
      while (b != nullptr) {  // walk down from the top
        if (b->address + b->size != end || b->segment != &s) fail("blocks do not tile");
        if (b->free) {
          ++free_blocks;
          if (b->prev != nullptr && b->prev->free) fail("two free neighbours");
          if (pool_of(s.small).count(key(b)) != 1) fail("free block not in its pool");
        } else {
          allocated += b->size;
        }
        if (b->prev != nullptr && b->prev->next != b) fail("broken links");
        end = b->address;
        b = b->prev;
      }
      if (end != s.start) fail("blocks do not start at the segment");
    }
    if (mapped != reserved_ || allocated != allocated_) fail("byte counts");
    if (free_blocks != small_.size() + large_.size()) fail("stale free blocks");
  }

 private:
  struct Segment;
  struct Block {
    std::uint64_t address = 0;
    std::size_t size = 0;
    std::size_t requested = 0;
    std::uint64_t tie = 0;  // its rank among equal sizes, while free
    Segment* segment = nullptr;
    bool free = false;
    Block* prev = nullptr;  // neighbours in the segment's mapped part
    Block* next = nullptr;
  };
  struct Segment {
    StreamId stream = kDefaultStream;
    bool small = false;
    std::uint64_t start = 0;       // of its address range
    std::uint64_t mapped_end = 0;  // the first unmapped byte
    Block* last = nullptr;         // the block that ends at mapped_end, if any
  };
  using Key = std::tuple<StreamId, std::size_t, std::uint64_t>;  // stream, size, tie
  using Pool = std::map<Key, Block*>;

  static constexpr std::size_t kMinBlock = 512;
  static constexpr std::size_t kSmallSize = 1 * MiB;
  // Each segment's address range; far above any device, so the unmapped tail always has room.
  static constexpr std::uint64_t kRangeBytes = std::uint64_t{1} << 40;

  static std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }
  static Key key(const Block* b) { return {b->segment->stream, b->size, b->tie}; }
  Pool& pool(bool small) { return small ? small_ : large_; }
  [[nodiscard]] const Pool& pool_of(bool small) const { return small ? small_ : large_; }
  [[noreturn]] static void fail(const char* what) {
    throw std::logic_error(std::string("torch expandable model: ") + what);
  }

  void insert_free(Block* b) {
    b->free = true;
    // Lowest address first, or the most recently freed first (a falling counter).
    b->tie = rules_.tie == TieBreak::lowest_address ? b->address : --recency_;
    pool(b->segment->small).emplace(key(b), b);
  }
  void erase_free(Block* b) { pool(b->segment->small).erase(key(b)); }

  // Step 1: best fit among mapped free blocks, lowest address on ties, the tail block last.
  Block* find_free(Pool& p, StreamId stream, std::size_t size) {
    auto it = p.lower_bound(Key{stream, size, 0});
    if (it == p.end() || std::get<0>(it->first) != stream) return nullptr;
    Block* b = it->second;
    if (rules_.tail_ranks_by_growth && b == b->segment->last) {
      // It could grow to the whole range: any other block of the stream that fits is smaller.
      const auto next = std::next(it);
      if (next != p.end() && std::get<0>(next->first) == stream) b = next->second;
    }
    erase_free(b);
    return b;
  }

  Segment& segment_for(StreamId stream, bool small) {
    const auto it = segments_.find({stream, small});
    if (it != segments_.end()) return *it->second;
    Segment& s = segment_storage_.emplace_back();
    s.stream = stream;
    s.small = small;
    s.start = next_range_;
    s.mapped_end = next_range_;
    next_range_ += kRangeBytes;
    ++result_.segments;
    segments_.emplace(std::make_pair(stream, small), &s);
    return s;
  }

  // Step 2: map whole pages after the segment's mapped part, merged with a free block before.
  Block* grow(StreamId stream, bool small, std::size_t size) {
    Segment& s = segment_for(stream, small);
    Block* tail = s.last != nullptr && s.last->free ? s.last : nullptr;
    const std::size_t have = tail != nullptr ? tail->size : 0;
    const std::size_t page = small ? rules_.small_page : rules_.large_page;
    const std::size_t bytes = round_up(size - have, page);
    ++result_.map_calls;
    result_.pages_mapped += bytes / page;
    reserved_ += bytes;
    result_.peak_reserved = std::max(result_.peak_reserved, reserved_);
    if (tail != nullptr) {
      erase_free(tail);
      tail->size += bytes;
    } else {
      tail = &storage_.emplace_back();
      tail->address = s.mapped_end;
      tail->size = bytes;
      tail->segment = &s;
      tail->prev = s.last;
      if (s.last != nullptr) s.last->next = tail;
      s.last = tail;
    }
    s.mapped_end += bytes;
    return tail;
  }

  Block* allocate(std::size_t requested, StreamId stream) {
    const std::size_t size = std::max(kMinBlock, round_up(requested, kMinBlock));
    const bool small = size <= kSmallSize;
    Block* b = find_free(pool(small), stream, size);
    if (b != nullptr) {
      ++result_.cache_hits;
    } else {
      b = grow(stream, small, size);
    }
    const std::size_t remaining = b->size - size;
    const bool split =
        (rules_.split_any_remainder || small) ? remaining >= kMinBlock : remaining > kSmallSize;
    if (split) {
      Block* rest = &storage_.emplace_back(*b);
      rest->address = b->address + size;
      rest->size = remaining;
      rest->prev = b;
      if (b->next != nullptr) b->next->prev = rest;
      b->next = rest;
      if (b->segment->last == b) b->segment->last = rest;
      b->size = size;
      insert_free(rest);
    }
    b->free = false;
    b->requested = requested;
    allocated_ += b->size;
    requested_ += requested;
    result_.peak_allocated = std::max(result_.peak_allocated, allocated_);
    result_.peak_requested = std::max(result_.peak_requested, requested_);
    return b;
  }

  // Step 4: merge with free neighbours (all mapped: the model never unmaps).
  void release(Block* b) {
    allocated_ -= b->size;
    requested_ -= b->requested;
    if (b->prev != nullptr && b->prev->free) {
      Block* prev = b->prev;
      erase_free(prev);
      prev->size += b->size;
      prev->next = b->next;
      if (b->next != nullptr) b->next->prev = prev;
      if (b->segment->last == b) b->segment->last = prev;
      b = prev;
    }
    if (b->next != nullptr && b->next->free) {
      Block* next = b->next;
      erase_free(next);
      b->size += next->size;
      b->next = next->next;
      if (next->next != nullptr) next->next->prev = b;
      if (b->segment->last == next) b->segment->last = b;
    }
    insert_free(b);
  }

  ExpandableRules rules_;
  std::unordered_map<std::uint64_t, Block*> live_;  // recorded address -> block
  Pool small_;
  Pool large_;
  std::map<std::pair<StreamId, bool>, Segment*> segments_;
  std::deque<Segment> segment_storage_;
  std::deque<Block> storage_;  // stable addresses; merged-away blocks are simply not referenced
  std::uint64_t next_range_ = std::uint64_t{1} << 44;
  std::uint64_t recency_ = std::numeric_limits<std::uint64_t>::max();
  std::size_t reserved_ = 0;
  std::size_t allocated_ = 0;
  std::size_t requested_ = 0;
  TorchExpandableResult result_;
};

[[nodiscard]] inline TorchExpandableResult replay_torch_expandable(const ReplayPlan& plan,
                                                                   ExpandableRules rules = {}) {
  return TorchExpandableReplayer(rules).run(plan);
}

}  // namespace memscope::bench
