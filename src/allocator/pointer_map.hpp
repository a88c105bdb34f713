// PointerMap: address -> Block for live allocations, an open-addressing hash table.
//
// free() looks a pointer up on every call, so this sits on the hot path. std::unordered_map
// allocates a node per insert; this table allocates only when it grows, probes linearly over
// a flat array (one or two cache lines per lookup) and deletes by backward shifting, so it
// never accumulates tombstones. Keys are 512-byte aligned addresses, never 0.
// Not synchronised; the allocator calls it under its lock.
#pragma once

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
    if ((size_ + 1) * 2 > slots_.size()) rehash(slots_.size() * 2);
  }

  void insert(std::uintptr_t key, Block* value) {
    reserve_one();
    std::size_t i = home(key);
    while (slots_[i].key != 0) i = (i + 1) & mask_;
    slots_[i] = {key, value};
    ++size_;
  }

  [[nodiscard]] Block* find(std::uintptr_t key) const noexcept {
    for (std::size_t i = home(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return slots_[i].value;
      if (slots_[i].key == 0) return nullptr;
    }
  }

  // Removes `key` and returns its block, or nullptr when absent.
  Block* erase(std::uintptr_t key) noexcept {
    std::size_t i = home(key);
    while (slots_[i].key != key) {
      if (slots_[i].key == 0) return nullptr;
      i = (i + 1) & mask_;
    }
    Block* const value = slots_[i].value;
    // Backward-shift deletion: pull later entries of the probe run into the hole when their home
    // slot is not between the hole and their current slot.
    std::size_t hole = i;
    for (std::size_t j = (i + 1) & mask_; slots_[j].key != 0; j = (j + 1) & mask_) {
      const std::size_t h = home(slots_[j].key);
      if (((j - h) & mask_) >= ((j - hole) & mask_)) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole] = {};
    --size_;
    return value;
  }

  [[nodiscard]] std::size_t size() const noexcept { return size_; }

 private:
  struct Slot {
    std::uintptr_t key = 0;
    Block* value = nullptr;
  };

  [[nodiscard]] std::size_t home(std::uintptr_t key) const noexcept {
    // Fibonacci hashing of the address without its always-zero low bits.
    return static_cast<std::size_t>(((key >> 9) * 0x9E3779B97F4A7C15ULL) >> shift_);
  }

  void rehash(std::size_t capacity) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    shift_ = 64U - static_cast<unsigned>(__builtin_ctzll(capacity));
    size_ = 0;
    for (const Slot& s : old) {
      if (s.key != 0) insert(s.key, s.value);
    }
  }

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  unsigned shift_ = 0;
  std::size_t size_ = 0;
};

}  // namespace memscope::detail
