#include "allocator/free_bins.hpp"

#include <algorithm>
#include <bit>
#include <cassert>

#include "allocator/size_rules.hpp"

namespace memscope::detail {
namespace {

// Small-pool blocks are at most one 2 MiB segment: 4096 exact classes (64 bitmap words).
constexpr std::size_t kSmallBins = kSmallBuffer / kMinBlockSize;
constexpr unsigned kSubBinBits = 4;       // 16 classes per power of two
constexpr unsigned kFirstLargeLog2 = 20;  // 1 MiB
constexpr std::size_t kLargeBins = (64 - kFirstLargeLog2) << kSubBinBits;
constexpr std::size_t kMaxWords = (std::max(kSmallBins, kLargeBins) + 63) / 64;

// What unprepared bins read: every class empty. Constant, so read-only memory: an insert()
// before prepare() faults at once instead of corrupting bins shared by every stream.
constexpr Block* kNoLists[kSmallBins + 1] = {};  // + the sentinel of best_fit()
constexpr SizeTreap kNoTrees[kLargeBins];
constexpr std::uint64_t kNoWords[kMaxWords] = {};

}  // namespace

FreeBins::FreeBins(bool small_pool)
    : small_pool_(small_pool),
      bins_(small_pool ? kSmallBins : kLargeBins),
      word_count_((bins_ + 63) / 64),
      // Only ever read through while unprepared (see kNoLists).
      lists_(const_cast<Block**>(kNoLists)),
      trees_(const_cast<SizeTreap*>(kNoTrees)),
      words_(const_cast<std::uint64_t*>(kNoWords)) {}

void FreeBins::prepare() {
  if (prepared()) return;
  auto words = std::make_unique<std::uint64_t[]>(word_count_);  // zeroed
  if (small_pool_) {
    own_lists_ = std::make_unique<Block*[]>(bins_ + 1);  // null; + the sentinel of best_fit()
    lists_ = own_lists_.get();
  } else {
    own_trees_ = std::make_unique<SizeTreap[]>(bins_);
    trees_ = own_trees_.get();
  }
  own_words_ = std::move(words);
  words_ = own_words_.get();
}

std::size_t FreeBins::bin_index(std::size_t size) const noexcept {
  if (small_pool_) {
    // Small-pool blocks and requests never exceed the 2 MiB segment, so the clamp only keeps
    // the index provably in range.
    const std::size_t index = size == 0 ? 0 : (size - 1) / kMinBlockSize;
    return index < kSmallBins ? index : kSmallBins - 1;
  }
  if (size < (std::size_t{1} << kFirstLargeLog2)) return 0;
  const auto log2 = static_cast<unsigned>(std::bit_width(size) - 1);
  const std::size_t sub = (size >> (log2 - kSubBinBits)) & ((1U << kSubBinBits) - 1);
  return ((log2 - kFirstLargeLog2) << kSubBinBits) + sub;
}

std::size_t FreeBins::next_nonempty(std::size_t from) const noexcept {
  if (from >= bins_) return bins_;
  std::size_t word = from / 64;
  const std::uint64_t here = words_[word] & (~std::uint64_t{0} << (from % 64));
  if (here != 0) return word * 64 + static_cast<std::size_t>(std::countr_zero(here));
  const std::uint64_t above = word + 1 < 64 ? summary_ & (~std::uint64_t{0} << (word + 1)) : 0;
  if (above == 0) return bins_;
  word = static_cast<std::size_t>(std::countr_zero(above));
  return word * 64 + static_cast<std::size_t>(std::countr_zero(words_[word]));
}

void FreeBins::mark(std::size_t bin, bool nonempty) noexcept {
  const std::uint64_t bit = std::uint64_t{1} << (bin % 64);
  if (nonempty) {
    words_[bin / 64] |= bit;
    summary_ |= std::uint64_t{1} << (bin / 64);
  } else {
    words_[bin / 64] &= ~bit;
    if (words_[bin / 64] == 0) summary_ &= ~(std::uint64_t{1} << (bin / 64));
  }
}

void FreeBins::insert(Block* block) noexcept {
  assert(prepared());
  const std::size_t bin = bin_index(block->size);
  block->bin = static_cast<std::uint32_t>(bin);
  block->cache_seq = ++next_seq_;
  block->cached = true;
  ++count_;
  if (small_pool_) {
    block->bin_prev = nullptr;
    block->bin_next = lists_[bin];
    if (lists_[bin] != nullptr) lists_[bin]->bin_prev = block;
    lists_[bin] = block;
  } else {
    trees_[bin].insert(block);
  }
  mark(bin, true);
}

void FreeBins::remove(Block* block) noexcept {
  const std::size_t bin = block->bin;
  bool now_empty = false;
  if (small_pool_) {
    if (block->bin_prev != nullptr) {
      block->bin_prev->bin_next = block->bin_next;
    } else {
      lists_[bin] = block->bin_next;
    }
    if (block->bin_next != nullptr) block->bin_next->bin_prev = block->bin_prev;
    block->bin_prev = block->bin_next = nullptr;
    now_empty = lists_[bin] == nullptr;
  } else {
    trees_[bin].erase(block);
    now_empty = trees_[bin].empty();
  }
  if (now_empty) mark(bin, false);
  block->cached = false;
  --count_;
}

Block* FreeBins::best_fit(std::size_t size) const noexcept {
  const std::size_t bin = bin_index(size);
  if (small_pool_) {
    // Exact classes: every block in a bin has the bin's size, so the head is the best fit.
    // next_nonempty() gives bins_ when none is: that list is the sentinel, always empty.
    return lists_[next_nonempty(bin)];
  }
  // The request's own class spans a range of sizes; every higher class fits entirely.
  if (Block* b = trees_[bin].lower_bound(size)) return b;
  const std::size_t found = next_nonempty(bin + 1);
  return found < bins_ ? trees_[found].smallest() : nullptr;
}

FreeBins::Problem FreeBins::audit(std::vector<const Block*>& out) const {
  const std::size_t first = out.size();
  Problem problem;
  const auto check = [&](const Block* b, std::size_t bin, const Block* before) {
    out.push_back(b);
    if (problem.what != nullptr) return;
    if (!b->cached) {
      problem = {"a block in the free bins is not marked cached", b};
    } else if (b->bin != bin || bin_index(b->size) != bin) {
      problem = {"a cached block is not in the size class of its size", b};
    } else if (before != nullptr &&
               (before->size > b->size ||
                (before->size == b->size && before->cache_seq < b->cache_seq))) {
      problem = {"a size class is not ordered by (size, most recently cached first)", b};
    }
  };
  // Visits the classes the bitmap marks; blocks in an unmarked class are missed, and then the
  // count below disagrees.
  for (std::size_t bin = next_nonempty(0); bin < bins_; bin = next_nonempty(bin + 1)) {
    const std::size_t before = out.size();
    if (small_pool_) {
      const Block* prev = nullptr;
      for (const Block* b = lists_[bin]; b != nullptr; prev = b, b = b->bin_next) {
        check(b, bin, nullptr);  // one exact size per class: the order is the caching order
        if (problem.what == nullptr && b->bin_prev != prev) problem = {"broken free-list links", b};
        if (out.size() - first > count_)
          return {"a free list is longer than count() (a cycle?)", b};
      }
    } else {
      const Block* prev = nullptr;
      trees_[bin].for_each([&](const Block* b) {
        check(b, bin, prev);
        prev = b;
      });
    }
    if (problem.what != nullptr) return problem;
    if (out.size() == before) return {"the bitmap marks an empty size class", nullptr};
  }
  if (count_ > 0 && !prepared()) return {"blocks in bins that were never prepared", nullptr};
  for (std::size_t word = 0; word < word_count_; ++word) {
    if (((summary_ >> word) & 1U) != (words_[word] != 0 ? 1U : 0U)) {
      return {"the summary bitmap disagrees with the class bitmap", nullptr};
    }
  }
  if (out.size() - first != count_) {
    return {"count() differs from the blocks the bins hold (a class not marked in the bitmap?)",
            nullptr};
  }
  return {};
}

}  // namespace memscope::detail
