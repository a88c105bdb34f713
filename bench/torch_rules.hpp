// PyTorch's default CUDA caching-allocator placement, re-implemented only to measure against.
//
// The rules of c10/cuda/CUDACachingAllocator.cpp with default settings: requests rounded up to
// 512 bytes; blocks up to 1 MiB from 2 MiB segments, 1-10 MiB from 20 MiB segments, larger ones
// from segments rounded up to 2 MiB; best fit from a set ordered by (stream, size, address), so
// ties go to the LOWEST ADDRESS; a found block is split when at least 512 B (small pool) or more
// than 1 MiB (large pool) would remain, the allocation taking the low part; a freed block merges
// with free neighbours in its segment. Fresh segments get increasing addresses, as a bump
// allocator would give them (a released segment's addresses are not given out again).
//
// TorchLimits adds what PyTorch does at capacity (DeviceCachingAllocator::malloc): a memory limit
// (the device's capacity: reserved bytes never exceed it) and max_split_size. On a miss whose new
// segment would exceed the limit, in this order:
//   1. release_available_cached_blocks (only when max_split_size is set): in the request's pool
//      and stream, release the smallest cached whole segment of at least max(request,
//      max_split_size) bytes; without one, release oversize (>= max_split_size) cached segments,
//      largest first, until together they make that many bytes; retry if they did;
//   2. release_cached_blocks: release every cached block that is a whole segment, both pools,
//      every stream; retry (num_alloc_retries);
//   3. out of memory: the run stops there (TorchRulesResult::ooms, first_oom_op).
// With max_split_size, a block of at least that size is never split, a request below it is never
// served by one, and a request at or above it only by a block less than 20 MiB bigger.
// Without a limit nothing is ever released, as before.
//
// TieBreak::most_recent swaps only the tie rule for memscope's (most recently cached first), so
// the two can be compared with everything else equal. The blocks are a TorchBlockList
// (torch_block_list.hpp), shared with the expandable model. Bench and test code only: the
// product's allocator is src/allocator. Not thread-safe.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <tuple>
#include <vector>

#include "memscope/trace.hpp"
#include "memscope/units.hpp"
#include "torch_block_list.hpp"

namespace memscope::bench {

struct TorchLimits {
  static constexpr std::size_t kUnlimited = std::numeric_limits<std::size_t>::max();
  std::size_t memory_limit = kUnlimited;    // bytes of segments the device holds at most
  std::size_t max_split_size = kUnlimited;  // PyTorch's max_split_size_mb, in bytes
};

struct TorchRulesResult : TorchBytePeaks {
  std::size_t peak_reserved = 0;
  std::size_t segments = 0;           // all reserved (some may have been released since)
  std::size_t segments_released = 0;  // at capacity (TorchLimits)
  std::size_t num_alloc_retries = 0;  // release_cached_blocks, then a retry
  std::size_t ooms = 0;               // allocations refused (run() stops at its first)
  std::size_t first_oom_op = 0;       // run(): the op refused, when ooms != 0
  std::size_t cache_hits = 0;         // allocations served from a cached block
  std::size_t ties = 0;  // ... when another cached block of that same size was there too
  std::vector<std::size_t> reserved_series;  // reserved bytes after each op
};

class TorchRulesReplayer {
 public:
  explicit TorchRulesReplayer(TieBreak tie, TorchLimits limits = {})
      : limits_(limits), blocks_(tie) {}

  // Replays `plan` on what earlier runs left; stops at an allocation the limit refuses (ooms).
  [[nodiscard]] TorchRulesResult run(const ReplayPlan& plan) {
    result_.reserved_series.reserve(result_.reserved_series.size() + plan.ops.size());
    for (std::size_t i = 0; i < plan.ops.size(); ++i) {
      if (!step(plan.ops[i])) {
        result_.first_oom_op = i;
        break;
      }
    }
    return result_;
  }
  // One op; false when the allocation is refused (nothing changes then but the releases made
  // trying, and ooms).
  bool step(const ReplayOp& op) {
    if (op.is_free) {
      blocks_.free_recorded(op.addr);
    } else if (!allocate(op.size, op.stream, op.addr)) {
      ++result_.ooms;
      return false;
    }
    result_.reserved_series.push_back(reserved_);
    return true;
  }
  // Frees what a run left live (a step's end), lowest recorded address first, so the plan can be
  // run again on the cache it left: the next iteration of a training loop.
  void release_all() {
    for (const std::uint64_t addr : blocks_.live_in_address_order()) blocks_.free_recorded(addr);
  }
  [[nodiscard]] std::size_t reserved_bytes() const noexcept { return reserved_; }
  [[nodiscard]] std::size_t allocated_bytes() const noexcept { return blocks_.allocated_bytes(); }
  [[nodiscard]] const TorchRulesResult& result() const noexcept { return result_; }

  // The model's own bookkeeping, for tests: every segment's blocks tile it, free blocks are in
  // their pool (and only those), no two free neighbours, allocated and reserved add up, and
  // reserved is within the limit. Throws std::logic_error naming the first violation.
  void check_invariants() const {
    TorchBlockList::Tally tally;
    for (const TorchBlock& first : blocks_.blocks()) {
      if (first.prev != nullptr || first.gone) continue;  // segments start at a first block
      blocks_.check_segment(&first, tally);
    }
    blocks_.check_tally(tally);
    if (tally.reserved != reserved_) TorchBlockList::fail("reserved bytes do not add up");
    if (reserved_ > limits_.memory_limit) TorchBlockList::fail("over the limit");
  }

 private:
  using Pool = TorchBlockList::Pool;

  static constexpr std::size_t kSmallBuffer = 2 * MiB;
  static constexpr std::size_t kMinLargeAlloc = 10 * MiB;
  static constexpr std::size_t kLargeBuffer = 20 * MiB;
  static constexpr std::size_t kRoundLarge = 2 * MiB;

  // get_free_block(): best fit in the pool and stream, within max_split_size's rules.
  TorchBlock* take_free(Pool& p, std::size_t size, StreamId stream) {
    const auto it = blocks_.best_fit(p, stream, size);
    if (it == p.end()) return nullptr;
    const std::size_t found = std::get<1>(it->first);
    const std::size_t limit = limits_.max_split_size;
    if (size < limit && found >= limit) return nullptr;  // no oversize block for a small request
    if (size >= limit && found >= size + kLargeBuffer) return nullptr;  // oversize, within 20 MiB
    ++result_.cache_hits;
    const auto after = std::next(it);
    if (after != p.end() && std::get<0>(after->first) == stream &&
        std::get<1>(after->first) == found) {
      ++result_.ties;  // here the tie rule decides which block is used
    }
    TorchBlock* b = it->second;
    p.erase(it);
    return b;
  }

  // alloc_block(): a fresh segment, unless it would take reserved bytes past the limit.
  TorchBlock* new_segment(std::size_t segment, StreamId stream, bool small) {
    if (segment > limits_.memory_limit || reserved_ > limits_.memory_limit - segment) {
      return nullptr;
    }
    TorchBlock* b = &blocks_.new_block();
    b->address = next_address_;
    b->size = segment;
    b->stream = stream;
    b->small = small;
    next_address_ += torch_round_up(segment, kRoundLarge);
    reserved_ += segment;
    ++result_.segments;
    result_.peak_reserved = std::max(result_.peak_reserved, reserved_);
    return b;
  }

  // A cached block that is a whole segment goes back to the device.
  void release_segment(TorchBlock* b) {
    blocks_.erase_free(b);
    b->free = false;
    b->gone = true;
    reserved_ -= b->size;
    ++result_.segments_released;
  }
  static bool whole(const TorchBlock* b) { return b->prev == nullptr && b->next == nullptr; }

  // release_available_cached_blocks(): see the top of this file.
  bool release_available(Pool& p, std::size_t size, StreamId stream) {
    const std::size_t limit = limits_.max_split_size;
    if (limit == TorchLimits::kUnlimited) return false;
    const std::size_t wanted = std::max(size, limit);
    auto it = p.lower_bound(TorchBlockList::Key{stream, wanted, 0});
    if (it != p.end() && std::get<0>(it->first) == stream && whole(it->second)) {
      release_segment(it->second);
      return true;
    }
    std::vector<TorchBlock*> largest_first;  // this stream's oversize blocks, from the largest down
    while (it != p.begin()) {
      --it;
      if (std::get<0>(it->first) != stream || std::get<1>(it->first) < limit) break;
      largest_first.push_back(it->second);
    }
    std::size_t released = 0;
    for (TorchBlock* b : largest_first) {
      if (released >= wanted) break;
      if (!whole(b)) continue;
      released += b->size;
      release_segment(b);
    }
    return released >= wanted;
  }

  // release_cached_blocks(): every cached whole segment, both pools, every stream.
  void release_all_cached() {
    for (Pool* p : {&blocks_.pool(false), &blocks_.pool(true)}) {
      std::vector<TorchBlock*> whole_segments;
      for (const auto& [k, b] : *p) {
        if (whole(b)) whole_segments.push_back(b);
      }
      for (TorchBlock* b : whole_segments) release_segment(b);
    }
  }

  // Serves the allocation recorded at `addr`; false when the limit refuses it.
  bool allocate(std::size_t requested, StreamId stream, std::uint64_t addr) {
    const std::size_t size = torch_block_size(requested);
    const bool small = size <= kTorchSmallSize;
    Pool& p = blocks_.pool(small);
    TorchBlock* b = take_free(p, size, stream);
    if (b == nullptr) {
      const std::size_t segment = small                   ? kSmallBuffer
                                  : size < kMinLargeAlloc ? kLargeBuffer
                                                          : torch_round_up(size, kRoundLarge);
      b = new_segment(segment, stream, small);
      if (b == nullptr && release_available(p, size, stream))
        b = new_segment(segment, stream, small);
      if (b == nullptr) {
        release_all_cached();
        ++result_.num_alloc_retries;
        b = new_segment(segment, stream, small);
      }
      if (b == nullptr) return false;
    }
    const std::size_t remaining = b->size - size;
    if (small ? remaining >= kTorchMinBlock
              : size < limits_.max_split_size && remaining > kTorchSmallSize) {
      blocks_.split(b, size);
    }
    blocks_.hand_out(b, requested, addr, result_);
    return true;
  }

  TorchLimits limits_;
  TorchBlockList blocks_;
  std::uint64_t next_address_ = std::uint64_t{1} << 40;
  std::size_t reserved_ = 0;
  TorchRulesResult result_;
};

[[nodiscard]] inline TorchRulesResult replay_torch_rules(const ReplayPlan& plan, TieBreak tie,
                                                         TorchLimits limits = {}) {
  return TorchRulesReplayer(tie, limits).run(plan);
}

}  // namespace memscope::bench
