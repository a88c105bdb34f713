// The block list both models of PyTorch's caching allocator keep (torch_rules.hpp, the default
// rules; torch_expandable_rules.hpp, expandable_segments:True): each segment's blocks linked in
// address order, the free ones in a set per pool ordered by (stream, size, tie), the recorded
// addresses of the live ones, and the allocated and requested bytes.
//
// What the two models share of c10/cuda/CUDACachingAllocator.cpp: requests rounded up to 512
// bytes, blocks up to 1 MiB in the small pool; best fit is the first key at or after (stream,
// size, 0), ties going to the lowest address (TieBreak::most_recent: memscope's rule, the most
// recently cached first); an allocation takes the low part of a split block; a freed block merges
// with its free neighbours. Where and how segments grow, and when a block is split, is each
// model's own.
//
// Bench and test code only: the product's allocator is src/allocator. Not thread-safe.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "memscope/trace.hpp"
#include "memscope/units.hpp"

namespace memscope::bench {

enum class TieBreak { lowest_address, most_recent };

inline constexpr std::size_t kTorchMinBlock = 512;
inline constexpr std::size_t kTorchSmallSize = 1 * MiB;  // the small pool's largest block

[[nodiscard]] constexpr std::size_t torch_round_up(std::size_t n, std::size_t to) {
  return (n + to - 1) / to * to;
}
// A request's block size: rounded up to 512 bytes.
[[nodiscard]] constexpr std::size_t torch_block_size(std::size_t requested) {
  return std::max(kTorchMinBlock, torch_round_up(requested, kTorchMinBlock));
}

// What both models' results count of the blocks they hand out, at its highest.
struct TorchBytePeaks {
  std::size_t peak_allocated = 0;  // rounded block sizes
  std::size_t peak_requested = 0;
};

struct TorchBlock {
  std::uint64_t address = 0;
  std::size_t size = 0;
  std::size_t requested = 0;
  StreamId stream = kDefaultStream;
  bool small = false;
  bool free = false;
  bool gone = false;           // its segment was released (the default rules at capacity)
  std::size_t segment = 0;     // the expandable model's segment (its index)
  std::uint64_t tie = 0;       // its position among equal sizes, while free
  TorchBlock* prev = nullptr;  // neighbours in the segment
  TorchBlock* next = nullptr;
};

class TorchBlockList {
 public:
  using Key = std::tuple<StreamId, std::size_t, std::uint64_t>;  // stream, size, tie
  using Pool = std::map<Key, TorchBlock*>;

  explicit TorchBlockList(TieBreak tie) : tie_(tie) {}

  // A new block, not linked and not free; its address stays put.
  [[nodiscard]] TorchBlock& new_block() { return storage_.emplace_back(); }
  [[nodiscard]] const std::deque<TorchBlock>& blocks() const noexcept { return storage_; }

  [[nodiscard]] Pool& pool(bool small) { return small ? small_ : large_; }
  [[nodiscard]] const Pool& pool(bool small) const { return small ? small_ : large_; }
  [[nodiscard]] static Key key(const TorchBlock* b) { return {b->stream, b->size, b->tie}; }
  // The first free block of `stream` at least `size` bytes (nullptr if none); not taken.
  [[nodiscard]] Pool::iterator best_fit(Pool& p, StreamId stream, std::size_t size) {
    const auto it = p.lower_bound(Key{stream, size, 0});
    return it != p.end() && std::get<0>(it->first) == stream ? it : p.end();
  }

  void insert_free(TorchBlock* b) {
    b->free = true;
    // Lowest address first, or the most recently freed first (a falling counter).
    b->tie = tie_ == TieBreak::lowest_address ? b->address : --recency_;
    pool(b->small).emplace(key(b), b);
  }
  void erase_free(TorchBlock* b) { pool(b->small).erase(key(b)); }

  // Cuts `b` to `size` bytes; the rest becomes a free block just above it, returned.
  TorchBlock* split(TorchBlock* b, std::size_t size) {
    TorchBlock* rest = &storage_.emplace_back(*b);
    rest->address = b->address + size;
    rest->size = b->size - size;
    rest->prev = b;
    if (b->next != nullptr) b->next->prev = rest;
    b->next = rest;
    b->size = size;
    insert_free(rest);
    return rest;
  }

  // `b` serves an allocation of `requested` bytes recorded at `addr`; `peaks` follow.
  void hand_out(TorchBlock* b, std::size_t requested, std::uint64_t addr, TorchBytePeaks& peaks) {
    b->free = false;
    b->requested = requested;
    allocated_ += b->size;
    requested_ += requested;
    peaks.peak_allocated = std::max(peaks.peak_allocated, allocated_);
    peaks.peak_requested = std::max(peaks.peak_requested, requested_);
    live_[addr] = b;
  }

  // Frees the allocation recorded at `addr`: its block merges with its free neighbours and goes
  // back to its pool. Returns the merged block. Throws std::logic_error if `addr` is not live.
  TorchBlock* free_recorded(std::uint64_t addr) {
    const auto it = live_.find(addr);
    if (it == live_.end()) throw std::logic_error("torch model: free of a block not live");
    TorchBlock* b = merge_into_free(it->second);
    live_.erase(it);
    return b;
  }
  // What a run left live, lowest recorded address first: the blocks to free for the next
  // iteration of a training loop (free_recorded() each).
  [[nodiscard]] std::vector<std::uint64_t> live_in_address_order() const {
    std::vector<std::uint64_t> addrs;
    addrs.reserve(live_.size());
    for (const auto& [addr, block] : live_) addrs.push_back(addr);
    std::sort(addrs.begin(), addrs.end());
    return addrs;
  }

  [[nodiscard]] std::size_t allocated_bytes() const noexcept { return allocated_; }

  // The blocks from `first` up, checked: they tile the segment from first's address, are linked
  // both ways, no two free ones are neighbours, and the free ones are in their pool. Adds what
  // it saw to `tally`; returns the address where the last block ends. Throws std::logic_error
  // naming the first violation.
  struct Tally {
    std::size_t reserved = 0;
    std::size_t allocated = 0;
    std::size_t free_blocks = 0;
  };
  std::uint64_t check_segment(const TorchBlock* first, Tally& tally) const {
    std::uint64_t at = first->address;
    for (const TorchBlock* b = first; b != nullptr; b = b->next) {
      if (b->address != at) fail("blocks do not tile a segment");
      if (b->next != nullptr && b->next->prev != b) fail("links");
      if (b->free && b->next != nullptr && b->next->free) fail("two free neighbours not merged");
      if (b->free) {
        ++tally.free_blocks;
        const auto it = pool(b->small).find(key(b));
        if (it == pool(b->small).end() || it->second != b) fail("a free block is not in its pool");
      } else {
        tally.allocated += b->size;
      }
      at += b->size;
      tally.reserved += b->size;
    }
    return at;
  }
  // After check_segment() over every segment: the pools hold only those free blocks, and the
  // allocated bytes add up.
  void check_tally(const Tally& tally) const {
    if (tally.free_blocks != small_.size() + large_.size()) {
      fail("the pools hold blocks that are not free");
    }
    if (tally.allocated != allocated_) fail("allocated bytes do not add up");
  }
  [[noreturn]] static void fail(const char* what) {
    throw std::logic_error(std::string("torch model: ") + what);
  }

 private:
  TorchBlock* merge_into_free(TorchBlock* b) {
    allocated_ -= b->size;
    requested_ -= b->requested;
    if (b->prev != nullptr && b->prev->free) {  // merge into the free block below
      TorchBlock* prev = b->prev;
      erase_free(prev);
      prev->size += b->size;
      prev->next = b->next;
      if (b->next != nullptr) b->next->prev = prev;
      b = prev;
    }
    if (b->next != nullptr && b->next->free) {  // absorb the free block above
      TorchBlock* next = b->next;
      erase_free(next);
      b->size += next->size;
      b->next = next->next;
      if (next->next != nullptr) next->next->prev = b;
    }
    insert_free(b);
    return b;
  }

  TieBreak tie_;
  std::unordered_map<std::uint64_t, TorchBlock*> live_;  // recorded address -> block
  Pool small_;
  Pool large_;
  std::deque<TorchBlock> storage_;  // stable addresses; merged-away blocks are not referenced
  std::uint64_t recency_ = std::numeric_limits<std::uint64_t>::max();
  std::size_t allocated_ = 0;
  std::size_t requested_ = 0;
};

}  // namespace memscope::bench
