// PointerMap: address -> Block for live allocations, an open-addressing hash table.
//
// free() looks a pointer up on every call, so this sits on the hot path. std::unordered_map
// allocates a node per insert; this table allocates only when it grows, probes linearly over
// flat arrays (two or three cache lines per lookup) and deletes by backward shifting, so it
// never accumulates tombstones. Keys are 512-byte aligned addresses, never 0.
// Not synchronised; the allocator calls it under its lock.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace memscope::detail {

struct Block;

class PointerMap {
 public:
  PointerMap() { rehash(64); }

  // Grows now if the next insert would have to, so that insert cannot fail afterwards.
  void reserve_one() {
    if ((size_ + 1) * 2 > keys_.size()) rehash(keys_.size() * 2);
  }

  // `value` is never null (find() relies on it).
  void insert(std::uintptr_t key, Block* value) {
    reserve_one();
    std::size_t i = home(key);
    while (keys_[i] != 0) i = (i + 1) & mask_;
    keys_[i] = key;
    values_[i] = value;
    ++size_;
  }

  // `key` must not be 0: 0 marks an empty slot, so find(0) would "find" an empty slot's null
  // value, which the fast return below promises is never null (undefined behaviour, a crash in
  // the caller). Callers that take addresses from users test for 0 first; the hot path's
  // callers already have (deallocate(nullptr) returns before the lookup).
  [[nodiscard]] Block* find(std::uintptr_t key) const noexcept {
    assert(key != 0);
    std::size_t i = home(key);
    if (keys_[i] != key) [[unlikely]] {  // most keys sit in their home slot
      do {
        if (keys_[i] == 0) return nullptr;
        i = (i + 1) & mask_;
      } while (keys_[i] != key);
    }
    Block* const value = values_[i];
    if (value == nullptr) __builtin_unreachable();  // said, callers test less
    return value;
  }

  // Removes `key` and returns its block, or nullptr when absent.
  Block* erase(std::uintptr_t key) noexcept {
    std::size_t i = home(key);
    while (keys_[i] != key) {
      if (keys_[i] == 0) return nullptr;
      i = (i + 1) & mask_;
    }
    Block* const value = values_[i];
    // Backward-shift deletion: pull later entries of the probe run into the hole when their home
    // slot is not between the hole and their current slot.
    std::size_t hole = i;
    for (std::size_t j = (i + 1) & mask_; keys_[j] != 0; j = (j + 1) & mask_) {
      const std::size_t h = home(keys_[j]);
      if (((j - h) & mask_) >= ((j - hole) & mask_)) {
        keys_[hole] = keys_[j];
        values_[hole] = values_[j];
        hole = j;
      }
    }
    keys_[hole] = 0;
    values_[hole] = nullptr;
    --size_;
    return value;
  }

  [[nodiscard]] std::size_t size() const noexcept { return size_; }

 private:
  [[nodiscard]] std::size_t home(std::uintptr_t key) const noexcept {
    // Fibonacci hashing: the top bits of the product. The address's always-zero low 9 bits only
    // shift the product left, so the top bits still mix all the others (not shifting them out
    // first saves the hot path two instructions).
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ULL) >> shift_);
  }

  void rehash(std::size_t capacity) {
    std::vector<std::uintptr_t> old_keys(capacity, 0);
    std::vector<Block*> old_values(capacity, nullptr);
    old_keys.swap(keys_);
    old_values.swap(values_);
    mask_ = capacity - 1;
    shift_ = 64U - static_cast<unsigned>(__builtin_ctzll(capacity));
    size_ = 0;
    for (std::size_t i = 0; i < old_keys.size(); ++i) {
      if (old_keys[i] != 0) insert(old_keys[i], old_values[i]);
    }
  }

  // Keys and values in two arrays: a probe compares keys with one instruction each, where a
  // 16-byte slot took four (the hot path's free, docs/design.md "Hot path").
  std::vector<std::uintptr_t> keys_;
  std::vector<Block*> values_;
  std::size_t mask_ = 0;
  unsigned shift_ = 0;
  std::size_t size_ = 0;
};

}  // namespace memscope::detail
