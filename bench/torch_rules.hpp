// PyTorch's default CUDA caching-allocator placement, re-implemented only to measure against.
//
// The rules of c10/cuda/CUDACachingAllocator.cpp with default settings: requests rounded up to
// 512 bytes; blocks up to 1 MiB from 2 MiB segments, 1-10 MiB from 20 MiB segments, larger ones
// from segments rounded up to 2 MiB; best fit from a set ordered by (stream, size, address), so
// ties go to the LOWEST ADDRESS; a found block is split when at least 512 B (small pool) or more
// than 1 MiB (large pool) would remain, the allocation taking the low part; a freed block merges
// with free neighbours in its segment. Nothing is ever released (the trace never runs out of
// memory), and fresh segments get increasing addresses, as a bump allocator would give them.
//
// TieBreak::most_recent swaps only the tie rule for memscope's (most recently cached first), so
// the two can be compared with everything else equal. Bench and test code only: the product's
// allocator is src/allocator. Not thread-safe.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <iterator>
#include <limits>
#include <map>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "memscope/trace.hpp"
#include "memscope/units.hpp"

namespace memscope::bench {

enum class TieBreak { lowest_address, most_recent };

struct TorchRulesResult {
  std::size_t peak_reserved = 0;
  std::size_t peak_allocated = 0;  // rounded block sizes
  std::size_t peak_requested = 0;
  std::size_t segments = 0;    // all reserved, none released
  std::size_t cache_hits = 0;  // allocations served from a cached block
  std::size_t ties = 0;        // ... when another cached block of that same size was there too
  std::vector<std::size_t> reserved_series;  // reserved bytes after each op
};

class TorchRulesReplayer {
 public:
  explicit TorchRulesReplayer(TieBreak tie) : tie_(tie) {}

  [[nodiscard]] TorchRulesResult run(const ReplayPlan& plan) {
    result_.reserved_series.reserve(result_.reserved_series.size() + plan.ops.size());
    for (const ReplayOp& op : plan.ops) {
      if (op.is_free) {
        const auto it = live_.find(op.addr);
        if (it == live_.end()) throw std::logic_error("torch rules: free of a block not live");
        release(it->second);
        live_.erase(it);
      } else {
        live_[op.addr] = allocate(op.size, op.stream);
      }
      result_.reserved_series.push_back(reserved_);
    }
    return result_;
  }
  // Frees what a run left live (a step's end), lowest recorded address first, so the plan can be
  // run again on the cache it left: the next iteration of a training loop.
  void release_all() {
    std::map<std::uint64_t, Block*> in_order(live_.begin(), live_.end());
    for (const auto& [addr, block] : in_order) release(block);
    live_.clear();
  }
  [[nodiscard]] std::size_t reserved_bytes() const noexcept { return reserved_; }

 private:
  struct Block {
    std::uint64_t address = 0;
    std::size_t size = 0;
    std::size_t requested = 0;
    StreamId stream = kDefaultStream;
    bool small = false;
    bool free = false;
    std::uint64_t tie = 0;  // its position among equal sizes, while free
    Block* prev = nullptr;  // neighbours in the segment
    Block* next = nullptr;
  };
  using Key = std::tuple<StreamId, std::size_t, std::uint64_t>;  // stream, size, tie
  using Pool = std::map<Key, Block*>;

  static constexpr std::size_t kMinBlock = 512;
  static constexpr std::size_t kSmallSize = 1 * MiB;
  static constexpr std::size_t kSmallBuffer = 2 * MiB;
  static constexpr std::size_t kMinLargeAlloc = 10 * MiB;
  static constexpr std::size_t kLargeBuffer = 20 * MiB;
  static constexpr std::size_t kRoundLarge = 2 * MiB;

  static std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

  static Key key(const Block* b) { return {b->stream, b->size, b->tie}; }
  Pool& pool(const Block* b) { return b->small ? small_ : large_; }

  void insert_free(Block* b) {
    b->free = true;
    // Lowest address first, or the most recently freed first (a falling counter).
    b->tie = tie_ == TieBreak::lowest_address ? b->address : --recency_;
    pool(b).emplace(key(b), b);
  }
  void erase_free(Block* b) { pool(b).erase(key(b)); }

  Block* allocate(std::size_t requested, StreamId stream) {
    const std::size_t size = std::max(kMinBlock, round_up(requested, kMinBlock));
    const bool small = size <= kSmallSize;
    Pool& p = small ? small_ : large_;
    Block* b = nullptr;
    const auto it = p.lower_bound(Key{stream, size, 0});
    if (it != p.end() && std::get<0>(it->first) == stream) {
      ++result_.cache_hits;
      const auto after = std::next(it);
      if (after != p.end() && std::get<0>(after->first) == stream &&
          std::get<1>(after->first) == std::get<1>(it->first)) {
        ++result_.ties;  // here the tie rule decides which block is used
      }
      b = it->second;
      p.erase(it);
    } else {
      const std::size_t segment = small                   ? kSmallBuffer
                                  : size < kMinLargeAlloc ? kLargeBuffer
                                                          : round_up(size, kRoundLarge);
      b = &storage_.emplace_back();
      b->address = next_address_;
      b->size = segment;
      b->stream = stream;
      b->small = small;
      next_address_ += round_up(segment, kRoundLarge);
      reserved_ += segment;
      ++result_.segments;
      result_.peak_reserved = std::max(result_.peak_reserved, reserved_);
    }
    const std::size_t remaining = b->size - size;
    if (small ? remaining >= kMinBlock : remaining > kSmallSize) {
      Block* rest = &storage_.emplace_back(*b);
      rest->address = b->address + size;
      rest->size = remaining;
      rest->prev = b;
      if (b->next != nullptr) b->next->prev = rest;
      b->next = rest;
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

  void release(Block* b) {
    allocated_ -= b->size;
    requested_ -= b->requested;
    if (b->prev != nullptr && b->prev->free) {  // merge into the free block below
      Block* prev = b->prev;
      erase_free(prev);
      prev->size += b->size;
      prev->next = b->next;
      if (b->next != nullptr) b->next->prev = prev;
      b = prev;
    }
    if (b->next != nullptr && b->next->free) {  // absorb the free block above
      Block* next = b->next;
      erase_free(next);
      b->size += next->size;
      b->next = next->next;
      if (next->next != nullptr) next->next->prev = b;
    }
    insert_free(b);
  }

  TieBreak tie_;
  std::unordered_map<std::uint64_t, Block*> live_;  // recorded address -> block
  Pool small_;
  Pool large_;
  std::deque<Block> storage_;  // stable addresses; merged-away blocks are simply not referenced
  std::uint64_t next_address_ = std::uint64_t{1} << 40;
  std::uint64_t recency_ = std::numeric_limits<std::uint64_t>::max();
  std::size_t reserved_ = 0;
  std::size_t allocated_ = 0;
  std::size_t requested_ = 0;
  TorchRulesResult result_;
};

[[nodiscard]] inline TorchRulesResult replay_torch_rules(const ReplayPlan& plan, TieBreak tie) {
  return TorchRulesReplayer(tie).run(plan);
}

}  // namespace memscope::bench
