#include "allocator/free_bins.hpp"

#include <bit>

#include "allocator/size_rules.hpp"

namespace memscope::detail {
namespace {

// Small-pool blocks are at most one 2 MiB segment: 4096 exact classes (64 bitmap words).
constexpr std::size_t kSmallBins = kSmallBuffer / kMinBlockSize;
constexpr unsigned kSubBinBits = 4;       // 16 classes per power of two
constexpr unsigned kFirstLargeLog2 = 20;  // 1 MiB
constexpr std::size_t kLargeBins = (64 - kFirstLargeLog2) << kSubBinBits;

}  // namespace

FreeBins::FreeBins(bool small_pool)
    : small_pool_(small_pool),
      heads_(small_pool ? kSmallBins : kLargeBins, nullptr),
      words_((heads_.size() + 63) / 64, 0) {}

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
  if (from >= heads_.size()) return heads_.size();
  std::size_t word = from / 64;
  const std::uint64_t here = words_[word] & (~std::uint64_t{0} << (from % 64));
  if (here != 0) return word * 64 + static_cast<std::size_t>(std::countr_zero(here));
  const std::uint64_t above = word + 1 < 64 ? summary_ & (~std::uint64_t{0} << (word + 1)) : 0;
  if (above == 0) return heads_.size();
  word = static_cast<std::size_t>(std::countr_zero(above));
  return word * 64 + static_cast<std::size_t>(std::countr_zero(words_[word]));
}

void FreeBins::insert(Block* block) noexcept {
  const std::size_t bin = bin_index(block->size);
  block->bin = static_cast<std::uint32_t>(bin);
  block->bin_prev = nullptr;
  block->bin_next = heads_[bin];
  if (heads_[bin] != nullptr) heads_[bin]->bin_prev = block;
  heads_[bin] = block;
  words_[bin / 64] |= std::uint64_t{1} << (bin % 64);
  summary_ |= std::uint64_t{1} << (bin / 64);
  block->cached = true;
  ++count_;
}

void FreeBins::remove(Block* block) noexcept {
  const std::size_t bin = block->bin;
  if (block->bin_prev != nullptr) {
    block->bin_prev->bin_next = block->bin_next;
  } else {
    heads_[bin] = block->bin_next;
  }
  if (block->bin_next != nullptr) block->bin_next->bin_prev = block->bin_prev;
  block->bin_prev = block->bin_next = nullptr;
  if (heads_[bin] == nullptr) {
    words_[bin / 64] &= ~(std::uint64_t{1} << (bin % 64));
    if (words_[bin / 64] == 0) summary_ &= ~(std::uint64_t{1} << (bin / 64));
  }
  block->cached = false;
  --count_;
}

Block* FreeBins::best_fit(std::size_t size) const noexcept {
  const std::size_t bin = bin_index(size);
  if (small_pool_) {
    // Exact classes: every block in a bin has the bin's size, so the head is the best fit.
    const std::size_t found = next_nonempty(bin);
    return found < heads_.size() ? heads_[found] : nullptr;
  }
  // The request's own class spans a range of sizes: find the smallest block that fits.
  Block* best = nullptr;
  if (bin < heads_.size()) {
    for (Block* b = heads_[bin]; b != nullptr; b = b->bin_next) {
      if (b->size >= size && (best == nullptr || b->size < best->size)) {
        best = b;
        if (b->size == size) return b;
      }
    }
  }
  if (best != nullptr) return best;
  // Every block in a higher class fits; take that class's smallest.
  const std::size_t found = next_nonempty(bin + 1);
  if (found >= heads_.size()) return nullptr;
  best = heads_[found];
  for (Block* b = best->bin_next; b != nullptr; b = b->bin_next) {
    if (b->size < best->size) best = b;
  }
  return best;
}

}  // namespace memscope::detail
