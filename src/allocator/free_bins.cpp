#include "allocator/free_bins.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <new>

#include "allocator/size_rules.hpp"

namespace memscope::detail {

FreeBins::FreeBins(bool small_pool) : small_pool_(small_pool) {}

FreeBins::~FreeBins() noexcept {
  // Bins are dropped empty, except when the allocator goes with blocks still cached.
  if (page_blocks_ > 0) leave_donors();
}

bool FreeBins::holds_whole_page(const Block& b) noexcept {
  const Segment& s = *b.segment;
  if (!s.expandable || s.page == 0) return false;
  const std::uintptr_t from = s.base + (b.address - s.base + s.page - 1) / s.page * s.page;
  return from + s.page <= b.address + b.size;
}

void FreeBins::count_page_block(Block* block) noexcept {
  block->holds_page = holds_whole_page(*block);
  if (!block->holds_page || page_blocks_++ > 0) return;
  donor_prev_ = nullptr;
  donor_next_ = donors_->first;
  if (donor_next_ != nullptr) donor_next_->donor_prev_ = this;
  donors_->first = this;
  ++donors_->count;
}

void FreeBins::uncount_page_block(Block* block) noexcept {
  if (!block->holds_page) return;
  block->holds_page = false;
  if (--page_blocks_ == 0) leave_donors();
}

void FreeBins::leave_donors() noexcept {
  page_blocks_ = 0;
  if (donor_prev_ != nullptr) {
    donor_prev_->donor_next_ = donor_next_;
  } else {
    donors_->first = donor_next_;
  }
  if (donor_next_ != nullptr) donor_next_->donor_prev_ = donor_prev_;
  donor_prev_ = donor_next_ = nullptr;
  --donors_->count;
}

std::size_t FreeBins::storage_bytes() const noexcept {
  if (!indexed()) return 0;
  return sizeof(Index) + bins() * sizeof(SizeTreap) + word_count() * sizeof(std::uint64_t);
}

void FreeBins::build_index() noexcept {
  auto index = std::unique_ptr<Index>(new (std::nothrow) Index);
  if (index == nullptr) return;
  index->words.reset(new (std::nothrow) std::uint64_t[word_count()]());
  index->trees.reset(new (std::nothrow) SizeTreap[bins()]);
  if (index->words == nullptr || index->trees == nullptr) return;
  index_ = std::move(index);
  for (Block* b = loose_; b != nullptr;) {
    Block* const next = b->bin_next;  // insert() relinks b
    index_->trees[b->bin].insert(b);
    mark(b->bin, true);
    b = next;
  }
  loose_ = nullptr;
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
  if (from >= bins()) return bins();
  std::size_t word = from / 64;
  const std::uint64_t here = index_->words[word] & (~std::uint64_t{0} << (from % 64));
  if (here != 0) return word * 64 + static_cast<std::size_t>(std::countr_zero(here));
  const std::uint64_t above =
      word + 1 < 64 ? index_->summary & (~std::uint64_t{0} << (word + 1)) : 0;
  if (above == 0) return bins();
  word = static_cast<std::size_t>(std::countr_zero(above));
  return word * 64 + static_cast<std::size_t>(std::countr_zero(index_->words[word]));
}

void FreeBins::mark(std::size_t bin, bool nonempty) noexcept {
  const std::uint64_t bit = std::uint64_t{1} << (bin % 64);
  if (nonempty) {
    index_->words[bin / 64] |= bit;
    index_->summary |= std::uint64_t{1} << (bin / 64);
  } else {
    index_->words[bin / 64] &= ~bit;
    if (index_->words[bin / 64] == 0) index_->summary &= ~(std::uint64_t{1} << (bin / 64));
  }
}

void FreeBins::insert(Block* block) noexcept {
  block->bin = static_cast<std::uint32_t>(bin_index(block->size));
  block->cache_seq = ++next_seq_;
  block->cached = true;
  ++count_;
  if (donors_ != nullptr) count_page_block(block);
  if (!indexed() && count_ > kLooseLimit) build_index();
  if (indexed()) {
    index_->trees[block->bin].insert(block);
    mark(block->bin, true);
    update_room();
    return;
  }
  block->bin_prev = nullptr;
  block->bin_next = loose_;
  if (loose_ != nullptr) loose_->bin_prev = block;
  loose_ = block;
  update_room();
}

void FreeBins::remove(Block* block) noexcept {
  const std::size_t bin = block->bin;
  block->cached = false;
  --count_;
  uncount_page_block(block);
  if (!indexed()) {
    if (block->bin_prev != nullptr) {
      block->bin_prev->bin_next = block->bin_next;
    } else {
      loose_ = block->bin_next;
    }
    if (block->bin_next != nullptr) block->bin_next->bin_prev = block->bin_prev;
    block->bin_prev = block->bin_next = nullptr;
    update_room();
    return;
  }
  index_->trees[bin].erase(block);
  if (index_->trees[bin].empty()) mark(bin, false);
  // Empty bins give their index back: a stream's storage follows the blocks it caches.
  if (count_ == 0) index_.reset();
  update_room();
}

void FreeBins::keep_room(FrontCacheRoom* room) noexcept {
  if (room_ != nullptr && room_ != room) *room_ = kClosedRoom;
  room_ = room;
  update_room();
}

FrontCacheRoom FreeBins::room_now() const noexcept {
  FrontCacheRoom room;
  room.limit = count_ == 0 ? 1 : 0;
  if (count_ == 1) room.next = reinterpret_cast<std::uintptr_t>(only_block());
  return room;
}

Block* FreeBins::only_block() const noexcept {
  if (count_ != 1) return nullptr;
  // The list's head, or (indexed until the bins empty) the best fit of all.
  return indexed() ? best_fit(0) : loose_;
}

Block* FreeBins::best_fit(std::size_t size) const noexcept {
  if (!indexed()) return loose_best_fit(size);
  // The request's own class may hold smaller blocks (a large-pool class spans a range of sizes);
  // every higher class fits entirely, and its leftmost block is the best of it.
  const std::size_t bin = bin_index(size);
  if (Block* b = index_->trees[bin].lower_bound(size)) return b;
  const std::size_t found = next_nonempty(bin + 1);
  return found < bins() ? index_->trees[found].smallest() : nullptr;
}

Block* FreeBins::loose_best_fit(std::size_t size) const noexcept {
  // The index's order (SizeTreap::before), so both phases choose the same block.
  Block* best = nullptr;
  for (Block* b = loose_; b != nullptr; b = b->bin_next) {
    if (b->size >= size && (best == nullptr || SizeTreap::before(b, best))) best = b;
  }
  return best;
}

FreeBins::Problem FreeBins::audit_list(std::vector<const Block*>& out) const {
  const std::size_t first = out.size();
  const Block* prev = nullptr;
  for (const Block* b = loose_; b != nullptr; prev = b, b = b->bin_next) {
    out.push_back(b);
    if (!b->cached) return {"a block in the free bins is not marked cached", b};
    if (bin_index(b->size) != b->bin)
      return {"a cached block is not in the size class of its size", b};
    if (b->bin_prev != prev) return {"broken free-list links", b};
    if (prev != nullptr && prev->cache_seq < b->cache_seq) {
      return {"the free list is not ordered most recently cached first", b};
    }
    if (out.size() - first > count_) return {"the free list is longer than count() (a cycle?)", b};
  }
  if (out.size() - first != count_) return {"count() differs from the blocks the bins hold", prev};
  return {};
}

FreeBins::Problem FreeBins::audit(std::vector<const Block*>& out) const {
  const std::size_t first = out.size();
  if (const Problem problem = audit_blocks(out); problem.what != nullptr) return problem;
  std::size_t page_blocks = 0;
  for (std::size_t i = first; i < out.size(); ++i) {
    const Block* b = out[i];
    if (b->holds_page != (donors_ != nullptr && holds_whole_page(*b))) {
      return {"a cached block's holds_page disagrees with the whole pages it holds", b};
    }
    if (b->holds_page) ++page_blocks;
  }
  if (page_blocks != page_blocks_) {
    return {"page_blocks() differs from the cached blocks with a whole page", nullptr};
  }
  return {};
}

FreeBins::Problem FreeBins::audit_blocks(std::vector<const Block*>& out) const {
  if (!indexed()) return audit_list(out);
  if (loose_ != nullptr) return {"indexed bins still hold a list", loose_};
  if (count_ == 0) return {"empty bins kept their index", nullptr};
  const std::size_t first = out.size();
  Problem problem;
  const auto check = [&](const Block* b, std::size_t bin, const Block* before) {
    out.push_back(b);
    if (problem.what != nullptr) return;
    if (!b->cached) {
      problem = {"a block in the free bins is not marked cached", b};
    } else if (b->bin != bin || bin_index(b->size) != bin) {
      problem = {"a cached block is not in the size class of its size", b};
    } else if (before != nullptr && !SizeTreap::before(before, b)) {
      problem = {"a size class is not ordered by (size, address)", b};
    }
  };
  // Visits the classes the bitmap marks; blocks in an unmarked class are missed, and then the
  // count below disagrees.
  for (std::size_t bin = next_nonempty(0); bin < bins(); bin = next_nonempty(bin + 1)) {
    const std::size_t before = out.size();
    const Block* prev = nullptr;
    index_->trees[bin].for_each([&](const Block* b) {
      check(b, bin, prev);
      prev = b;
    });
    if (problem.what != nullptr) return problem;
    if (out.size() == before) return {"the bitmap marks an empty size class", nullptr};
  }
  for (std::size_t word = 0; word < word_count(); ++word) {
    if (((index_->summary >> word) & 1U) != (index_->words[word] != 0 ? 1U : 0U)) {
      return {"the summary bitmap disagrees with the class bitmap", nullptr};
    }
  }
  if (out.size() - first != count_) {
    return {"count() differs from the blocks the bins hold (a class not marked in the bitmap?)",
            nullptr};
  }
  return {};
}

// PyTorch's rule for expandable segments, which keeps them compact: a free block followed by
// unmapped space ranks by the size it could grow to, so any other block that fits comes first
// and the tail is cut into only when nothing else fits.
Block* FreeBins::best_fit_sparing_tails(Block* tail, std::size_t rounded,
                                        std::size_t split_limit) noexcept {
  const auto is_tail = [](const Block* b) { return b->next != nullptr && b->next->unmapped; };
  std::array<Block*, 8> tails{};
  std::size_t n = 0;
  Block* found = tail;
  while (found != nullptr && is_tail(found) && n < tails.size()) {
    tails[n++] = found;
    remove(found);
    found = best_fit(rounded);
    if (found != nullptr && !may_serve(found->size, rounded, split_limit)) found = nullptr;
  }
  for (std::size_t i = n; i-- > 0;) insert(tails[i]);
  return found != nullptr && !is_tail(found) ? found : tails[0];
}

}  // namespace memscope::detail
