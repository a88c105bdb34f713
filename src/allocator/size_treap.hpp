// SizeTreap: the cached blocks of one size class, ordered by size and, among equal sizes, by
// address (lowest first, the block PyTorch's rules take); an intrusive treap (a binary search
// tree kept balanced by random priorities), so lookups, inserts and removals cost O(log n) in the
// blocks of the class and never allocate.
//
// A large-pool class spans 1/16 of a power of two, so it can hold blocks of many different
// sizes; a plain list made the best-fit search linear in them (measured: 5.9 ms per allocation
// with 100,000 blocks in one class). Among equal sizes the order is the address, so the best fit
// is the leftmost block: until issue 43 the tie was the most recently cached, and the lowest
// address was found by scanning up to 64 blocks of that size on every miss (+15% instructions
// per replayed op on the corpus).
//
// The links are the block's bin_prev (left) and bin_next (right); the key is (size, address,
// cache_seq descending): two cached blocks never share an address, so cache_seq (unique per
// insert) only orders blocks built by hand without one (tests), most recent first, as before.
// The priority is a hash of cache_seq, so the shape is random but deterministic. Not
// synchronised.
#pragma once

#include <cstddef>
#include <cstdint>

#include "allocator/block.hpp"

namespace memscope::detail {

class SizeTreap {
 public:
  [[nodiscard]] bool empty() const noexcept { return root_ == nullptr; }

  // Both iterative: the bins insert and erase on every miss and free of the slow path, and the
  // recursive forms cost more than the search they serve (callgrind on the corpus replay).
  void insert(Block* x) noexcept {
    if (root_ == nullptr) {  // most classes hold one block at a time: no priority to compare
      x->bin_prev = x->bin_next = nullptr;
      root_ = x;
      return;
    }
    const std::uint64_t p = priority(x);
    Block** link = &root_;  // descend while the tree's priorities are at least x's
    while (*link != nullptr && priority(*link) >= p) {
      link = before(x, *link) ? &(*link)->bin_prev : &(*link)->bin_next;
    }
    // x takes that place; what was there splits into x's subtrees.
    Block** left = &x->bin_prev;
    Block** right = &x->bin_next;
    for (Block* t = *link; t != nullptr;) {
      if (before(t, x)) {
        *left = t;
        left = &t->bin_next;
        t = t->bin_next;
      } else {
        *right = t;
        right = &t->bin_prev;
        t = t->bin_prev;
      }
    }
    *left = *right = nullptr;
    *link = x;
  }
  void erase(Block* x) noexcept {
    Block** link = &root_;
    while (*link != x) link = before(x, *link) ? &(*link)->bin_prev : &(*link)->bin_next;
    // x's subtrees joined in its place, by priority.
    Block* a = x->bin_prev;
    Block* b = x->bin_next;
    while (a != nullptr && b != nullptr) {
      if (priority(a) > priority(b)) {
        *link = a;
        link = &a->bin_next;
        a = a->bin_next;
      } else {
        *link = b;
        link = &b->bin_prev;
        b = b->bin_prev;
      }
    }
    *link = a != nullptr ? a : b;
    x->bin_prev = x->bin_next = nullptr;
  }

  // The smallest block of at least `size` bytes (the lowest address among equals), or null.
  [[nodiscard]] Block* lower_bound(std::size_t size) const noexcept {
    Block* best = nullptr;
    for (Block* t = root_; t != nullptr;) {
      if (t->size >= size) {
        best = t;
        t = t->bin_prev;
      } else {
        t = t->bin_next;
      }
    }
    return best;
  }
  [[nodiscard]] Block* smallest() const noexcept {
    Block* t = root_;
    while (t != nullptr && t->bin_prev != nullptr) t = t->bin_prev;
    return t;
  }

  // The order of the tree, and of every best fit: smaller first, among equal sizes the lower
  // address, and at one address (never two cached blocks; blocks built by hand) the more recently
  // cached (higher cache_seq) first.
  [[nodiscard]] static bool before(const Block* a, const Block* b) noexcept {
    if (a->size != b->size) return a->size < b->size;
    if (a->address != b->address) return a->address < b->address;
    return a->cache_seq > b->cache_seq;
  }

  // Calls f(Block*) for every block, smallest first.
  template <class F>
  void for_each(F&& f) const {
    visit(root_, f);
  }

 private:
  static std::uint64_t priority(const Block* b) noexcept {
    std::uint64_t x = b->cache_seq + 0x9E3779B97F4A7C15ULL;  // splitmix64 finaliser
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
  }
  template <class F>
  static void visit(Block* t, F& f) {
    if (t == nullptr) return;
    visit(t->bin_prev, f);
    f(t);
    visit(t->bin_next, f);
  }

  Block* root_ = nullptr;
};

}  // namespace memscope::detail
