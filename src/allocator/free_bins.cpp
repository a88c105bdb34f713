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
  const std::size_t classes =
      small_pool_ ? (bins() + 1) * sizeof(void*) : bins() * sizeof(SizeTreap);
  return sizeof(Index) + classes + word_count() * sizeof(std::uint64_t);
}

void FreeBins::build_index() noexcept {
  auto index = std::unique_ptr<Index>(new (std::nothrow) Index);
  if (index == nullptr) return;
  index->words.reset(new (std::nothrow) std::uint64_t[word_count()]());
  if (small_pool_) {
    index->lists.reset(new (std::nothrow) Block*[bins() + 1]());  // + best_fit()'s sentinel
  } else {
    index->trees.reset(new (std::nothrow) SizeTreap[bins()]);
  }
  if (index->words == nullptr || (index->lists == nullptr && index->trees == nullptr)) return;
  index_ = std::move(index);
  // Oldest first (the list's tail first), so each small-pool class ends newest first.
  Block* b = loose_;
  while (b != nullptr && b->bin_next != nullptr) b = b->bin_next;
  while (b != nullptr) {
    Block* newer = b->bin_prev;
    file_in_index(b);
    b = newer;
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
    file_in_index(block);
    update_room();
    return;
  }
  block->bin_prev = nullptr;
  block->bin_next = loose_;
  if (loose_ != nullptr) loose_->bin_prev = block;
  loose_ = block;
  update_room();
}

void FreeBins::file_in_index(Block* block) noexcept {
  const std::size_t bin = block->bin;
  if (small_pool_) {
    block->bin_prev = nullptr;
    block->bin_next = index_->lists[bin];
    if (index_->lists[bin] != nullptr) index_->lists[bin]->bin_prev = block;
    index_->lists[bin] = block;
  } else {
    index_->trees[bin].insert(block);
  }
  mark(bin, true);
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
  bool now_empty = false;
  if (small_pool_) {
    if (block->bin_prev != nullptr) {
      block->bin_prev->bin_next = block->bin_next;
    } else {
      index_->lists[bin] = block->bin_next;
    }
    if (block->bin_next != nullptr) block->bin_next->bin_prev = block->bin_prev;
    block->bin_prev = block->bin_next = nullptr;
    now_empty = index_->lists[bin] == nullptr;
  } else {
    index_->trees[bin].erase(block);
    now_empty = index_->trees[bin].empty();
  }
  if (now_empty) mark(bin, false);
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
  const std::size_t bin = bin_index(size);
  if (small_pool_) {
    // Exact classes: every block in a bin has the bin's size, so the head is the best fit.
    // next_nonempty() gives bins() when none is: that list is the sentinel, always empty.
    return index_->lists[next_nonempty(bin)];
  }
  // The request's own class spans a range of sizes; every higher class fits entirely.
  if (Block* b = index_->trees[bin].lower_bound(size)) return b;
  const std::size_t found = next_nonempty(bin + 1);
  return found < bins() ? index_->trees[found].smallest() : nullptr;
}

Block* FreeBins::best_fit_lowest(std::size_t size) const noexcept {
  Block* const first = best_fit(size);
  if (first == nullptr) return nullptr;
  Block* lowest = first;
  const auto consider = [&lowest](Block* b) {
    if (b->address < lowest->address) lowest = b;
  };
  if (!indexed()) {
    std::size_t seen = 0;
    for (Block* b = loose_; b != nullptr && seen < kLowestOf; b = b->bin_next) {
      if (b->size == first->size) {
        consider(b);
        ++seen;
      }
    }
    return lowest;
  }
  if (small_pool_) {  // an exact class: every block in the list has first's size
    std::size_t seen = 1;
    for (Block* b = first->bin_next; b != nullptr && seen < kLowestOf; b = b->bin_next, ++seen) {
      consider(b);
    }
    return lowest;
  }
  const SizeTreap& tree = index_->trees[first->bin];
  std::size_t seen = 1;
  for (Block* b = tree.after(first); b != nullptr && b->size == first->size && seen < kLowestOf;
       b = tree.after(b), ++seen) {
    consider(b);
  }
  return lowest;
}

Block* FreeBins::loose_best_fit(std::size_t size) const noexcept {
  // Newest first: a strictly smaller size replaces the best, so among equals the newest stays.
  Block* best = nullptr;
  for (Block* b = loose_; b != nullptr; b = b->bin_next) {
    if (b->size >= size && (best == nullptr || b->size < best->size)) best = b;
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
    } else if (before != nullptr &&
               (before->size > b->size ||
                (before->size == b->size && before->cache_seq < b->cache_seq))) {
      problem = {"a size class is not ordered by (size, most recently cached first)", b};
    }
  };
  // Visits the classes the bitmap marks; blocks in an unmarked class are missed, and then the
  // count below disagrees.
  for (std::size_t bin = next_nonempty(0); bin < bins(); bin = next_nonempty(bin + 1)) {
    const std::size_t before = out.size();
    if (small_pool_) {
      const Block* prev = nullptr;
      for (const Block* b = index_->lists[bin]; b != nullptr; prev = b, b = b->bin_next) {
        check(b, bin, nullptr);  // one exact size per class: the order is the caching order
        if (problem.what == nullptr && b->bin_prev != prev) problem = {"broken free-list links", b};
        if (out.size() - first > count_)
          return {"a free list is longer than count() (a cycle?)", b};
      }
    } else {
      const Block* prev = nullptr;
      index_->trees[bin].for_each([&](const Block* b) {
        check(b, bin, prev);
        prev = b;
      });
    }
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
    found = best_fit_lowest(rounded);
    if (found != nullptr && !may_serve(found->size, rounded, split_limit)) found = nullptr;
  }
  for (std::size_t i = n; i-- > 0;) insert(tails[i]);
  return found != nullptr && !is_tail(found) ? found : tails[0];
}

}  // namespace memscope::detail
