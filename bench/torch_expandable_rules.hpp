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
// The blocks are a TorchBlockList (torch_block_list.hpp), shared with the default rules' model.
// Bench and test code only: the product's allocator is src/allocator. Not thread-safe.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <iterator>
#include <map>
#include <utility>
#include <vector>

#include "memscope/trace.hpp"
#include "memscope/units.hpp"
#include "torch_block_list.hpp"

namespace memscope::bench {

// The rules that can be switched off, to measure what each one is worth.
struct ExpandableRules {
  std::size_t small_page = 2 * MiB;
  std::size_t large_page = 20 * MiB;
  bool tail_ranks_by_growth = true;  // step 1's exception for the block before the unmapped tail
  bool split_any_remainder = true;   // step 3; false: the default rules' split condition
  TieBreak tie = TieBreak::lowest_address;  // step 1 among equal sizes (memscope: most_recent)
};

struct TorchExpandableResult : TorchBytePeaks {
  std::size_t peak_reserved = 0;             // mapped bytes
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
  explicit TorchExpandableReplayer(ExpandableRules rules = {})
      : rules_(rules), blocks_(rules.tie) {}

  [[nodiscard]] TorchExpandableResult run(const ReplayPlan& plan) {
    result_.reserved_series.reserve(plan.ops.size());
    for (const ReplayOp& op : plan.ops) step(op);
    return result_;
  }

  // One op of a plan (allocations are named by op.addr); the result so far.
  void step(const ReplayOp& op) {
    if (op.is_free) {
      note_tail(blocks_.free_recorded(op.addr));
    } else {
      const TorchBlock* b = allocate(op.size, op.stream, op.addr);
      result_.offsets.push_back(b->address - segment_storage_[b->segment].start);
    }
    result_.reserved_series.push_back(reserved_);
  }
  [[nodiscard]] const TorchExpandableResult& result() const noexcept { return result_; }
  [[nodiscard]] std::size_t allocated_bytes() const noexcept {  // now
    return blocks_.allocated_bytes();
  }
  [[nodiscard]] std::size_t reserved_bytes() const noexcept { return reserved_; }  // now
  // Frees what a run left live, lowest recorded address first, so the plan can run again on
  // the cache it left (the next iteration of a training loop).
  void release_all() {
    for (const std::uint64_t addr : blocks_.live_in_address_order()) {
      note_tail(blocks_.free_recorded(addr));
    }
  }

  // The model's own bookkeeping, checked from scratch (tests): each segment's blocks tile its
  // mapped part exactly, which is whole pages; no two free blocks are neighbours; the free sets
  // hold exactly the free blocks; reserved and allocated bytes add up. Throws std::logic_error.
  void check_invariants() const {
    std::size_t mapped = 0;
    TorchBlockList::Tally tally;
    for (std::size_t i = 0; i < segment_storage_.size(); ++i) {
      const Segment& s = segment_storage_[i];
      const std::size_t page = s.small ? rules_.small_page : rules_.large_page;
      const std::uint64_t length = s.mapped_end - s.start;
      if (length % page != 0) TorchBlockList::fail("mapped part not whole pages");
      mapped += length;
      if (length == 0) continue;
      const TorchBlock* first = s.last;
      for (; first->prev != nullptr; first = first->prev) {
        if (first->segment != i) TorchBlockList::fail("a block in the wrong segment");
      }
      if (first->segment != i) TorchBlockList::fail("a block in the wrong segment");
      if (first->address != s.start || s.last->next != nullptr ||
          blocks_.check_segment(first, tally) != s.mapped_end) {
        TorchBlockList::fail("blocks do not tile the mapped part");
      }
    }
    blocks_.check_tally(tally);
    if (mapped != reserved_ || tally.reserved != reserved_) {
      TorchBlockList::fail("reserved bytes do not add up");
    }
  }

 private:
  struct Segment {
    StreamId stream = kDefaultStream;
    bool small = false;
    std::uint64_t start = 0;       // of its address range
    std::uint64_t mapped_end = 0;  // the first unmapped byte
    TorchBlock* last = nullptr;    // the block that ends at mapped_end, if any
  };
  using Pool = TorchBlockList::Pool;

  // Each segment's address range; far above any device, so the unmapped tail always has room.
  static constexpr std::uint64_t kRangeBytes = std::uint64_t{1} << 40;

  // A block just merged or split off: the segment's tail when nothing is above it.
  void note_tail(TorchBlock* b) {
    if (b->next == nullptr) segment_storage_[b->segment].last = b;
  }

  // Step 1: best fit among mapped free blocks, lowest address on ties, the tail block last.
  TorchBlock* find_free(Pool& p, StreamId stream, std::size_t size) {
    auto it = blocks_.best_fit(p, stream, size);
    if (it == p.end()) return nullptr;
    TorchBlock* b = it->second;
    if (rules_.tail_ranks_by_growth && b == segment_storage_[b->segment].last) {
      // It could grow to the whole range: any other block of the stream that fits is smaller.
      const auto next = std::next(it);
      if (next != p.end() && std::get<0>(next->first) == stream) b = next->second;
    }
    blocks_.erase_free(b);
    return b;
  }

  // The segment of (stream, pool), and its index.
  std::size_t segment_for(StreamId stream, bool small) {
    const auto it = segments_.find({stream, small});
    if (it != segments_.end()) return it->second;
    const std::size_t index = segment_storage_.size();
    Segment& s = segment_storage_.emplace_back();
    s.stream = stream;
    s.small = small;
    s.start = next_range_;
    s.mapped_end = next_range_;
    next_range_ += kRangeBytes;
    ++result_.segments;
    segments_.emplace(std::make_pair(stream, small), index);
    return index;
  }

  // Step 2: map whole pages after the segment's mapped part, merged with a free block before.
  TorchBlock* grow(StreamId stream, bool small, std::size_t size) {
    const std::size_t index = segment_for(stream, small);
    Segment& s = segment_storage_[index];
    TorchBlock* tail = s.last != nullptr && s.last->free ? s.last : nullptr;
    const std::size_t have = tail != nullptr ? tail->size : 0;
    const std::size_t page = small ? rules_.small_page : rules_.large_page;
    const std::size_t bytes = torch_round_up(size - have, page);
    ++result_.map_calls;
    result_.pages_mapped += bytes / page;
    reserved_ += bytes;
    result_.peak_reserved = std::max(result_.peak_reserved, reserved_);
    if (tail != nullptr) {
      blocks_.erase_free(tail);
      tail->size += bytes;
    } else {
      tail = &blocks_.new_block();
      tail->address = s.mapped_end;
      tail->size = bytes;
      tail->stream = stream;
      tail->small = small;
      tail->segment = index;
      tail->prev = s.last;
      if (s.last != nullptr) s.last->next = tail;
      s.last = tail;
    }
    s.mapped_end += bytes;
    return tail;
  }

  // Serves the allocation recorded at `addr`.
  TorchBlock* allocate(std::size_t requested, StreamId stream, std::uint64_t addr) {
    const std::size_t size = torch_block_size(requested);
    const bool small = size <= kTorchSmallSize;
    TorchBlock* b = find_free(blocks_.pool(small), stream, size);
    if (b != nullptr) {
      ++result_.cache_hits;
    } else {
      b = grow(stream, small, size);
    }
    const std::size_t remaining = b->size - size;
    const bool split = (rules_.split_any_remainder || small) ? remaining >= kTorchMinBlock
                                                             : remaining > kTorchSmallSize;
    if (split) note_tail(blocks_.split(b, size));
    blocks_.hand_out(b, requested, addr, result_);
    return b;
  }

  ExpandableRules rules_;
  TorchBlockList blocks_;
  std::map<std::pair<StreamId, bool>, std::size_t> segments_;  // -> index in segment_storage_
  std::deque<Segment> segment_storage_;
  std::uint64_t next_range_ = std::uint64_t{1} << 44;
  std::size_t reserved_ = 0;
  TorchExpandableResult result_;
};

[[nodiscard]] inline TorchExpandableResult replay_torch_expandable(const ReplayPlan& plan,
                                                                   ExpandableRules rules = {}) {
  return TorchExpandableReplayer(rules).run(plan);
}

}  // namespace memscope::bench
