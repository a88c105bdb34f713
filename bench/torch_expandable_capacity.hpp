// PyTorch's `expandable_segments:True` at capacity, re-implemented only to measure against (the
// rules of c10/cuda/CUDACachingAllocator.cpp as read there; our own code). The model of
// torch_expandable_rules.hpp never unmaps, so its mapped part is always a prefix of each range;
// at capacity PyTorch unmaps free pages anywhere, and later growth fills those holes first. This
// model keeps every block of each range, the unmapped ones too:
//   - Ranges: one per (stream, pool) to begin with, of 1 1/8 of the device's memory (PyTorch's
//     ExpandableSegment reserves that much address space), pages of 2 MiB (small pool) and 20
//     MiB (large pool); another range is opened only when no unmapped block of the stream's pool
//     has room (find_expandable_block).
//   - Best fit (get_free_block): among the mapped free blocks of the stream's pool, ordered by
//     (size, address), the first that fits; then, while the next one in that order has a smaller
//     expandable size (its size plus the unmapped block right after it, if any), that one.
//   - Growth (try_allocate_expandable_block): the lowest-address unmapped block of the stream's
//     pool, with the free block just before it if any, whose run of free and unmapped blocks
//     holds the request; pages are mapped from its start (one map_block call per unmapped block
//     mapped into, each all or nothing: cuMemCreate fails past the device's memory and the pages
//     of that call are given back), merging with free neighbours.
//   - At capacity (malloc): a growth the device refuses is followed by release_cached_blocks, which
//     unmaps the whole pages of every free block, large pool then small, every stream
//     (unmap_block; a range left wholly unmapped is given back), and one more growth; then out of
//     memory, where run() stops.
//   - A found block is split when at least 512 bytes would remain (should_split under expandable
//     segments), the allocation taking the low part; a freed block merges with its free mapped
//     neighbours.
// Without a limit it places every block where torch_expandable_rules.hpp does (tests pin it).
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
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "memscope/trace.hpp"
#include "memscope/units.hpp"
#include "torch_block_list.hpp"

namespace memscope::bench {

struct TorchExpandableCapacityResult : TorchBytePeaks {
  std::size_t peak_reserved = 0;   // mapped bytes
  std::size_t ranges = 0;          // address ranges opened (some given back since)
  std::size_t map_calls = 0;       // map_block calls that mapped (num_device_alloc)
  std::size_t pages_mapped = 0;    // cuMemCreate + cuMemMap each
  std::size_t unmap_calls = 0;     // unmap_block calls that unmapped (num_device_free)
  std::size_t pages_unmapped = 0;  // cuMemUnmap + cuMemRelease each
  std::size_t num_alloc_retries = 0;
  std::size_t ooms = 0;                      // run() stops at the first
  std::vector<std::uint64_t> offsets;        // each allocation's offset in its range, in op order
  std::vector<std::size_t> reserved_series;  // mapped bytes after each op
};

class TorchExpandableCapacityReplayer {
 public:
  static constexpr std::size_t kUnlimited = std::numeric_limits<std::size_t>::max();
  // `capacity`: the device's memory, which mapped bytes never exceed.
  explicit TorchExpandableCapacityReplayer(std::size_t capacity = kUnlimited,
                                           std::size_t small_page = 2 * MiB,
                                           std::size_t large_page = 20 * MiB)
      : capacity_(capacity), small_page_(small_page), large_page_(large_page) {}

  // Replays `plan` on what earlier runs left; stops at an allocation the device refuses.
  TorchExpandableCapacityResult run(const ReplayPlan& plan) {
    for (const ReplayOp& op : plan.ops) {
      if (!step(op)) break;
    }
    return result_;
  }
  // One op; false when the allocation is refused (ooms).
  bool step(const ReplayOp& op) {
    if (op.is_free) {
      free_recorded(op.addr);
    } else {
      Block* b = allocate(op.size, op.stream);
      if (b == nullptr) {
        ++result_.ooms;
        return false;
      }
      live_[op.addr] = b;
      result_.offsets.push_back(b->address - ranges_[b->range].start);
    }
    result_.reserved_series.push_back(mapped_);
    return true;
  }
  // Frees what a run left live, lowest recorded address first (the next iteration's start).
  void release_all() {
    std::vector<std::uint64_t> addrs;
    addrs.reserve(live_.size());
    for (const auto& entry : live_) addrs.push_back(entry.first);
    std::sort(addrs.begin(), addrs.end());
    for (const std::uint64_t a : addrs) free_recorded(a);
  }
  [[nodiscard]] const TorchExpandableCapacityResult& result() const noexcept { return result_; }
  [[nodiscard]] std::size_t reserved_bytes() const noexcept { return mapped_; }

  // The model's bookkeeping from scratch (tests): every open range is tiled by its blocks; no
  // two free mapped or two unmapped blocks are neighbours; unmapped blocks are whole pages (but
  // at the range's end, which without a limit is 2^40 bytes); the
  // sets hold exactly the free and the unmapped blocks; mapped and allocated bytes add up.
  void check_invariants() const {
    std::size_t mapped = 0;
    std::size_t allocated = 0;
    std::size_t free_count = 0;
    std::size_t unmapped_count = 0;
    for (const Range& r : ranges_) {
      if (r.first == nullptr) continue;
      std::uint64_t at = r.start;
      for (const Block* b = r.first; b != nullptr; b = b->next) {
        if (b->address != at) fail("blocks do not tile a range");
        if (b->next != nullptr && b->next->prev != b) fail("links");
        if (b->next != nullptr && b->mapped == b->next->mapped && b->is_free() &&
            b->next->is_free()) {
          fail("two free neighbours of one kind not merged");
        }
        if (!b->mapped) {
          if ((b->address - r.start) % r.page != 0 ||
              (b->next != nullptr && b->size % r.page != 0)) {
            fail("an unmapped block is not whole pages");
          }
          ++unmapped_count;
          if (unmapped(b->small).count(unmapped_key(b)) == 0) fail("unmapped block not listed");
        } else {
          mapped += b->size;
          if (b->free) {
            ++free_count;
            if (free(b->small).count(free_key(b)) == 0) fail("free block not in its pool");
          } else {
            allocated += b->size;
          }
        }
        at += b->size;
      }
      if (at != r.start + r.bytes) fail("a range's blocks do not reach its end");
    }
    if (free_count != small_free_.size() + large_free_.size()) fail("stale free blocks");
    if (unmapped_count != small_unmapped_.size() + large_unmapped_.size()) {
      fail("stale unmapped blocks");
    }
    if (mapped != mapped_ || allocated != allocated_) fail("bytes do not add up");
    if (mapped_ > capacity_) fail("mapped past the device's memory");
  }

 private:
  struct Block {
    std::uint64_t address = 0;
    std::size_t size = 0;
    std::size_t requested = 0;
    StreamId stream = kDefaultStream;
    std::size_t range = 0;
    bool small = false;
    bool mapped = true;
    bool free = false;
    Block* prev = nullptr;
    Block* next = nullptr;
    [[nodiscard]] bool is_free() const noexcept { return !mapped || free; }
  };
  struct Range {
    std::uint64_t start = 0;
    std::size_t bytes = 0;
    std::size_t page = 0;
    Block* first = nullptr;  // null once given back
  };
  using FreeKey = std::tuple<StreamId, std::size_t, std::uint64_t>;  // stream, size, address
  using UnmappedKey = std::pair<StreamId, std::uint64_t>;            // stream, address
  static FreeKey free_key(const Block* b) { return {b->stream, b->size, b->address}; }
  static UnmappedKey unmapped_key(const Block* b) { return {b->stream, b->address}; }
  std::map<FreeKey, Block*>& free(bool small) { return small ? small_free_ : large_free_; }
  const std::map<FreeKey, Block*>& free(bool small) const {
    return small ? small_free_ : large_free_;
  }
  std::map<UnmappedKey, Block*>& unmapped(bool small) {
    return small ? small_unmapped_ : large_unmapped_;
  }
  const std::map<UnmappedKey, Block*>& unmapped(bool small) const {
    return small ? small_unmapped_ : large_unmapped_;
  }
  [[noreturn]] static void fail(const char* what) {
    throw std::logic_error(std::string("torch expandable capacity model: ") + what);
  }

  // Files a free mapped or an unmapped block in its set.
  void file(Block* b) {
    if (b->mapped) {
      b->free = true;
      free(b->small).emplace(free_key(b), b);
    } else {
      unmapped(b->small).emplace(unmapped_key(b), b);
    }
  }
  void unfile(Block* b) {
    if (b->mapped) {
      free(b->small).erase(free_key(b));
    } else {
      unmapped(b->small).erase(unmapped_key(b));
    }
  }
  // Merges `b` (not filed) with its neighbours of the same kind (free mapped, or unmapped).
  Block* merge(Block* b) {
    const auto same = [b](const Block* n) {
      return n != nullptr && n->mapped == b->mapped && n->is_free();
    };
    if (same(b->prev)) {
      Block* p = b->prev;
      unfile(p);
      p->size += b->size;
      p->next = b->next;
      if (b->next != nullptr) b->next->prev = p;
      b = p;
    }
    if (same(b->next)) {
      Block* n = b->next;
      unfile(n);
      b->size += n->size;
      b->next = n->next;
      if (n->next != nullptr) n->next->prev = b;
    }
    return b;
  }
  // Cuts `b` at `bytes`; the rest, a block of the same kind just above it (not filed), returned.
  Block* cut(Block* b, std::size_t bytes) {
    Block* rest = &storage_.emplace_back(*b);
    rest->address = b->address + bytes;
    rest->size = b->size - bytes;
    rest->prev = b;
    if (b->next != nullptr) b->next->prev = rest;
    b->next = rest;
    b->size = bytes;
    return rest;
  }

  Block* allocate(std::size_t requested, StreamId stream) {
    const std::size_t size = torch_block_size(requested);
    const bool small = size <= kTorchSmallSize;
    Block* b = get_free_block(small, stream, size);
    if (b == nullptr) b = try_allocate(small, stream, size);
    if (b == nullptr) {
      release_cached_blocks();
      ++result_.num_alloc_retries;
      b = try_allocate(small, stream, size);
    }
    if (b == nullptr) return nullptr;
    b->free = false;  // before the split, so the rest does not merge back into it
    if (b->size - size >= kTorchMinBlock) file(merge(cut(b, size)));
    b->requested = requested;
    allocated_ += b->size;
    requested_ += requested;
    result_.peak_allocated = std::max(result_.peak_allocated, allocated_);
    result_.peak_requested = std::max(result_.peak_requested, requested_);
    return b;
  }

  // Best fit, a block followed by unmapped space ranked by the size it could grow to.
  Block* get_free_block(bool small, StreamId stream, std::size_t size) {
    auto& pool = free(small);
    auto it = pool.lower_bound(FreeKey{stream, size, 0});
    if (it == pool.end() || std::get<0>(it->first) != stream) return nullptr;
    const auto expandable_size = [](const Block* b) {
      return b->size + (b->next != nullptr && !b->next->mapped ? b->next->size : 0);
    };
    for (auto next = std::next(it); next != pool.end() && std::get<0>(next->first) == stream &&
                                    expandable_size(next->second) < expandable_size(it->second);
         ++next) {
      it = next;
    }
    Block* b = it->second;
    pool.erase(it);
    return b;
  }

  // The first block of the lowest-address run of free and unmapped blocks of the stream's pool
  // that starts at or just before an unmapped block and holds `size` bytes; else a new range's.
  Block* find_expandable_block(bool small, StreamId stream, std::size_t size) {
    auto& pool = unmapped(small);
    for (auto it = pool.lower_bound(UnmappedKey{stream, 0});
         it != pool.end() && it->first.first == stream; ++it) {
      Block* c = it->second;
      if (c->prev != nullptr && c->prev->is_free()) c = c->prev;
      std::size_t bytes = 0;
      for (const Block* b = c; b != nullptr && b->is_free() && bytes < size; b = b->next) {
        bytes += b->size;
      }
      if (bytes >= size) return c;
    }
    const std::size_t page = small ? small_page_ : large_page_;
    Range& r = ranges_.emplace_back();
    r.page = page;
    // 1 1/8 of the device's memory, in pages; without a limit, far more than any trace needs.
    r.bytes = capacity_ == kUnlimited ? std::size_t{1} << 40
                                      : torch_round_up(capacity_ + capacity_ / 8, page);
    r.start = next_range_;
    next_range_ += std::max<std::size_t>(r.bytes, std::size_t{1} << 40);
    ++result_.ranges;
    Block* u = &storage_.emplace_back();
    u->address = r.start;
    u->size = r.bytes;
    u->stream = stream;
    u->small = small;
    u->range = ranges_.size() - 1;
    u->mapped = false;
    r.first = u;
    file(u);
    return u;
  }

  // Maps the pages of unmapped `u` covering its first `bytes`, merged with free neighbours;
  // the mapped block (filed), or null when the device has no room (nothing changes then).
  Block* map_block(Block* u, std::size_t bytes) {
    const std::size_t page = ranges_[u->range].page;
    const std::size_t length = std::min(u->size, torch_round_up(bytes, page));
    if (length > capacity_ - mapped_) return nullptr;
    unfile(u);
    if (length < u->size) file(cut(u, length));
    u->mapped = true;
    mapped_ += length;
    result_.peak_reserved = std::max(result_.peak_reserved, mapped_);
    ++result_.map_calls;
    result_.pages_mapped += length / page;
    Block* m = merge(u);
    file(m);
    return m;
  }

  Block* try_allocate(bool small, StreamId stream, std::size_t size) {
    Block* c = find_expandable_block(small, stream, size);
    if (!c->mapped) {
      c = map_block(c, std::min(c->size, size));
      if (c == nullptr) return nullptr;
    }
    while (c->size < size) {  // a free block, then unmapped space
      if (c->next == nullptr || c->next->mapped) fail("a run ends before the request");
      c = map_block(c->next, std::min(size - c->size, c->next->size));
      if (c == nullptr) return nullptr;
    }
    unfile(c);
    return c;
  }

  // Every free block's whole pages unmapped, large pool first, every stream; a range left
  // wholly unmapped is given back.
  void release_cached_blocks() {
    for (const bool small : {false, true}) {
      std::vector<Block*> blocks;
      for (const auto& entry : free(small)) blocks.push_back(entry.second);
      for (Block* b : blocks) unmap_block(b);
    }
  }
  void unmap_block(Block* b) {
    const Range& r = ranges_[b->range];
    const std::uint64_t from = r.start + torch_round_up(b->address - r.start, r.page);
    const std::uint64_t to = r.start + (b->address + b->size - r.start) / r.page * r.page;
    if (from >= to) return;
    unfile(b);
    if (from > b->address) {  // the free part below stays mapped
      Block* const below = b;
      b = cut(below, from - b->address);
      file(below);
    }
    if (to < b->address + b->size) file(cut(b, to - b->address));
    b->mapped = false;
    b->free = false;
    mapped_ -= to - from;
    ++result_.unmap_calls;
    result_.pages_unmapped += (to - from) / r.page;
    b = merge(b);
    if (b->prev == nullptr && b->next == nullptr) {
      ranges_[b->range].first = nullptr;  // cuMemAddressFree
    } else {
      if (b->prev == nullptr) ranges_[b->range].first = b;
      file(b);
    }
  }

  void free_recorded(std::uint64_t addr) {
    const auto it = live_.find(addr);
    if (it == live_.end()) fail("free of a block not live");
    Block* b = it->second;
    live_.erase(it);
    allocated_ -= b->size;
    requested_ -= b->requested;
    b->free = true;
    file(merge(b));
  }

  std::size_t capacity_;
  std::size_t small_page_;
  std::size_t large_page_;
  std::deque<Block> storage_;  // stable addresses; merged-away blocks are not referenced
  std::deque<Range> ranges_;
  std::map<FreeKey, Block*> small_free_;
  std::map<FreeKey, Block*> large_free_;
  std::map<UnmappedKey, Block*> small_unmapped_;
  std::map<UnmappedKey, Block*> large_unmapped_;
  std::unordered_map<std::uint64_t, Block*> live_;  // recorded address -> block
  std::uint64_t next_range_ = std::uint64_t{1} << 44;
  std::size_t mapped_ = 0;
  std::size_t allocated_ = 0;
  std::size_t requested_ = 0;
  TorchExpandableCapacityResult result_;
};

// Whether PyTorch's expandable segments (the model) replay `plan` `iterations` times back to back
// on a device of `capacity` bytes.
[[nodiscard]] inline bool torch_expandable_fit(const ReplayPlan& plan, std::size_t capacity,
                                               int iterations) {
  TorchExpandableCapacityReplayer model(capacity);
  for (int i = 0; i < iterations; ++i) {
    if (model.run(plan).ooms != 0) return false;
    model.release_all();
  }
  return true;
}

}  // namespace memscope::bench
