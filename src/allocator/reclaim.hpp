// Reclaim: what the allocator core gives back, and when, on its miss path: the free-memory
// callbacks a miss calls before it grows, garbage collection above its threshold (the oldest
// cached blocks first), at the limit the oversize cached segments a new segment may replace,
// and whether a release of everything cached can find anything. A value member of
// AllocatorCore. The candidates are cached blocks of the BlockStore's pools that the segment
// source can give back; each one the policy here picks is released through a `release`
// function: release(Block*) gives the block's memory back and returns the bytes it freed. Not
// synchronised (the core's caller locks).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "allocator/block.hpp"
#include "memscope/config.hpp"

namespace memscope::detail {

class BlockStore;
class SegmentSource;

class Reclaim {
 public:
  explicit Reclaim(const AllocatorConfig& config) noexcept
      : gc_threshold_(config.garbage_collection_threshold),
        max_split_size_(config.max_split_size),
        expandable_(config.expandable_segments) {}

  // --- Free-memory callbacks (CachingAllocator::add_free_memory_callback) -------------------
  void add_free_memory_callback(std::function<bool()> callback) {
    free_memory_callbacks_.push_back(std::move(callback));
  }
  // Calls every callback; whether any said it freed memory.
  bool call_free_memory_callbacks();

  // --- Garbage collection (garbage_collection_threshold) ------------------------------------
  [[nodiscard]] bool collects_garbage() const noexcept { return gc_threshold_ > 0.0; }
  // The bytes to give back with `reserved` bytes reserved under `limit`: what lies above the
  // threshold's share of the limit; 0 at or below it.
  [[nodiscard]] std::size_t garbage_target(std::size_t reserved, std::size_t limit) const noexcept;
  // Releases the blocks of `freeable` (cached, aged by Block::cached_at against `clock`) at
  // least as old as their average, round after round, until `target` bytes are released:
  // releasing more than needed keeps gc from triggering again on the next miss.
  template <class Release>
  static void collect(std::vector<Block*>& freeable, std::size_t target, std::uint64_t clock,
                      Release&& release);
  // Garbage collection of `target` bytes over `store`: collect() on every large cached block
  // that `source` can give back (SegmentSource::collectable: a whole fixed segment, an
  // expandable block with whole pages inside), released by `source` (SegmentSource::collect).
  // The caller flushed the front caches. A collection touches no other cached block.
  static void collect_garbage(const BlockStore& store, SegmentSource& source, std::size_t target,
                              std::uint64_t clock);

  // --- Releasing everything cached (empty_cache, the last retry at the limit) ---------------
  // Whether a walk over every stream for whole cached memory would find nothing, with `frees`
  // frees made so far (AllocatorStatistics::frees()): with fixed segments a whole cached
  // segment appears only through a free, and the last walk released every one. Expandable
  // segments also leave ranges and pages behind when a growth fails: they walk every time.
  [[nodiscard]] bool release_finds_nothing(std::uint64_t frees) const noexcept {
    return !expandable_ && released_once_ && frees == frees_at_release_;
  }
  // Such a walk was made with `frees` frees made.
  void released(std::uint64_t frees) noexcept {
    frees_at_release_ = frees;
    released_once_ = true;
  }

  // --- At the limit (max_split_size) --------------------------------------------------------
  // Whether oversize segments exist to release (max_split_size is set), and its value.
  [[nodiscard]] bool limits_splits() const noexcept {
    return max_split_size_ != AllocatorConfig::kUnlimited;
  }
  [[nodiscard]] std::size_t max_split_size() const noexcept { return max_split_size_; }
  // Room for a new segment for `rounded` bytes from `oversize` (whole cached oversize
  // segments): the smallest that alone is big enough, else the biggest until together they are.
  // Whether what was released makes room.
  template <class Release>
  bool release_oversize(std::vector<Block*>& oversize, std::size_t rounded,
                        Release&& release) const;

 private:
  double gc_threshold_;
  std::size_t max_split_size_;
  bool expandable_;                     // expandable_segments
  std::uint64_t frees_at_release_ = 0;  // `frees` at the last walk of released()
  bool released_once_ = false;          // frees_at_release_ holds
  std::vector<std::function<bool()>> free_memory_callbacks_;
};

template <class Release>
void Reclaim::collect(std::vector<Block*>& freeable, std::size_t target, std::uint64_t clock,
                      Release&& release) {
  std::size_t reclaimed = 0;
  while (reclaimed < target && !freeable.empty()) {
    double total_age = 0;
    for (const Block* b : freeable) total_age += static_cast<double>(clock - b->cached_at);
    const double average = total_age / static_cast<double>(freeable.size());
    const auto old = std::stable_partition(freeable.begin(), freeable.end(), [&](const Block* b) {
      return static_cast<double>(clock - b->cached_at) < average;
    });
    for (auto it = old; it != freeable.end(); ++it) reclaimed += release(*it);
    freeable.erase(old, freeable.end());
  }
}

template <class Release>
bool Reclaim::release_oversize(std::vector<Block*>& oversize, std::size_t rounded,
                               Release&& release) const {
  const std::size_t wanted = std::max(rounded, max_split_size_);
  // One block big enough: release the smallest such.
  Block* best = nullptr;
  for (Block* b : oversize) {
    if (b->size >= wanted && (best == nullptr || b->size < best->size)) best = b;
  }
  if (best != nullptr) {
    release(best);
    return true;
  }
  // Otherwise release the biggest ones until together they make room for the request.
  std::sort(oversize.begin(), oversize.end(), [](Block* a, Block* b) { return a->size > b->size; });
  std::size_t released = 0;
  for (Block* b : oversize) {
    if (released >= wanted) break;
    released += release(b);
  }
  return released >= wanted;
}

}  // namespace memscope::detail
