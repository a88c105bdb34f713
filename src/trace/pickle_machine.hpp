// PickleMachine: the unpickler's state (stack, marks, memo) over an arena of plain objects.
//
// Python's memo shares objects: a list memoized while empty and filled later must be the same
// list wherever it is fetched again. So containers live in an arena and the stack and memo hold
// references (Ref) to them; build() turns the finished graph into a PickleValue, building each
// container once (a shared object stays shared), refusing cycles and nesting beyond the limit.
// The arena is flat vectors, so a hostile nesting depth cannot overflow the stack while parsing
// or destroying; every byte the machine keeps is charged to a budget so a small input cannot
// make it build without bound.
// Errors: PickleProblem (the reader adds where). Not thread-safe; one machine per read.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "memscope/pickle.hpp"

namespace memscope::detail {

// A value on the stack or in a container: a scalar, or an index into the arena. 16 bytes.
struct Ref {
  PickleKind kind = PickleKind::none;
  std::uint64_t bits = 0;  // int64 for bool and int, the double's bits, or the arena index

  [[nodiscard]] std::int64_t integer() const noexcept { return static_cast<std::int64_t>(bits); }
  [[nodiscard]] double real() const noexcept { return std::bit_cast<double>(bits); }
  [[nodiscard]] std::size_t index() const noexcept { return static_cast<std::size_t>(bits); }
};

class PickleMachine {
 public:
  PickleMachine(std::size_t max_bytes, std::size_t max_depth, std::uint64_t max_tree_items);

  // ---- stack and marks (a pop never reaches below the innermost mark) ----
  [[gnu::always_inline]] void push(const Ref& ref) {
    charge(sizeof(Ref));
    stack_.push_back(ref);
  }
  [[nodiscard]] Ref pop() {
    if (stack_.size() <= fence()) underflow("nothing to pop");
    const Ref ref = stack_.back();
    stack_.pop_back();
    return ref;
  }
  [[nodiscard]] const Ref& top() const {
    if (stack_.size() <= fence()) underflow("no object on the stack");
    return stack_.back();
  }
  void mark();
  // Removes the innermost mark; the items above it stay on the stack, from the returned position
  // (items_from()) to the top, until truncate() drops them.
  [[nodiscard]] std::size_t pop_mark();
  [[nodiscard]] const Ref* items_from(std::size_t start) const noexcept {
    return stack_.data() + start;
  }
  [[nodiscard]] std::size_t stack_size() const noexcept { return stack_.size(); }
  // The item just below position `start`: the container APPENDS and SETITEMS fill, which must be
  // above the innermost remaining mark.
  [[nodiscard]] Ref below(std::size_t start) const {
    if (start == 0 || start - 1 < fence() || start > stack_.size()) {
      underflow("no object below the mark");
    }
    return stack_[start - 1];
  }
  void truncate(std::size_t size) { stack_.resize(size); }
  // POP: the top item, or the innermost mark when nothing is above it (Python's rule).
  void pop_item_or_mark();

  // ---- building ----
  // Equal strings (and equal bytes) are stored once, so a key compares by its index.
  [[nodiscard]] Ref make_string(std::string_view text, bool is_bytes);
  [[nodiscard]] Ref make_string(std::string&& text, bool is_bytes);
  // An int outside int64, by its decimal text (interned with the strings; the kind tells apart).
  [[nodiscard]] Ref make_big_integer(std::string_view decimal) {
    Ref ref = make_string(decimal, /*is_bytes=*/false);
    ref.kind = PickleKind::big_integer;
    return ref;
  }
  [[nodiscard]] Ref make_sequence(const Ref* items, std::size_t n, bool is_tuple);
  [[nodiscard]] Ref make_dict();
  void append(const Ref& list, const Ref* items, std::size_t n);
  void set_item(const Ref& dict, const Ref& key, const Ref& value);
  // set_item() for `n` key/value pairs in a row (SETITEMS, DICT): one allocation, not several.
  void set_items(const Ref& dict, const Ref* pairs, std::size_t n);

  // ---- memo ----
  void memo_put(std::uint64_t index);  // the top of the stack
  void memoize() {
    if (memo_count_ == memo_.size() && stack_.size() > fence()) {
      // The common case, inline: every slot so far is set, and this one goes at the end.
      charge(sizeof(MemoSlot));
      memo_.push_back(MemoSlot{stack_.back(), true});
      ++memo_count_;
      return;
    }
    memo_put(memo_count_);
  }
  [[gnu::always_inline]] void memo_get(std::uint64_t index) {  // pushes
    if (index < memo_.size() && memo_[index].set) {
      push(memo_[index].ref);
    } else {
      memo_get_sparse(index);
    }
  }

  // The finished value `root`; shared objects stay shared, cycles are refused.
  [[nodiscard]] PickleValue build(const Ref& root);
  // The checks of build() without building: cycles, max_depth and max_tree_items, with the same
  // errors, so a reader can then walk the graph in place (below) within the same bounds.
  void check(const Ref& root);

  // ---- the graph in place, for readers that skip build(); valid until the machine dies ----
  // A str's text, a bytes' octets or a big int's decimal text.
  [[nodiscard]] const std::string& string_at(const Ref& ref) const noexcept {
    return *string_ptrs_[ref.index()];
  }
  [[nodiscard]] const std::vector<Ref>& sequence_items(const Ref& ref) const noexcept {
    return sequences_[ref.index()].items;
  }
  [[nodiscard]] const std::vector<std::pair<Ref, Ref>>& dict_items(const Ref& ref) const noexcept {
    return dicts_[ref.index()].items;
  }

 private:
  struct Sequence {
    std::vector<Ref> items;
    bool is_tuple = false;
  };
  // A dict's keys are unique. Small dicts of scalar keys (every dict of a PyTorch snapshot) find
  // a key by a scan; larger ones, or ones with tuple keys, through a hash of key_code().
  struct Dict {
    std::vector<std::pair<Ref, Ref>> items;
    std::unique_ptr<std::unordered_map<std::string, std::size_t>> index;  // key_code -> item
  };
  struct MemoSlot {
    Ref ref;
    bool set = false;
  };

  void charge(std::size_t bytes) {
    if (bytes > max_bytes_ - used_bytes_) over_budget();
    used_bytes_ += bytes;
  }
  [[noreturn]] void over_budget() const;
  [[noreturn]] static void underflow(const char* what);
  [[nodiscard]] std::size_t fence() const noexcept { return marks_.empty() ? 0 : marks_.back(); }
  // A byte string equal for keys Python's dict treats as equal (1 == 1.0 == True); throws for
  // unhashable keys.
  void key_code(const Ref& key, std::size_t depth, std::string& out);
  // Python's == for scalar keys (str and bytes are interned, so equal means the same index).
  [[nodiscard]] static bool same_scalar_key(const Ref& a, const Ref& b) noexcept;
  void index_dict(Dict& d);
  void set_item(Dict& d, const Ref& key, const Ref& value);
  // The size of a value walked as a tree: containers nested in it, including itself (0 for a
  // scalar), and items counting every appearance of a shared object.
  struct Shape {
    std::size_t height = 0;
    std::uint64_t items = 1;
  };
  void build_into(const Ref& ref, std::size_t depth, Shape& shape, PickleValue& out);
  void add_child(Shape& total, const Shape& child) const {
    total.height = std::max(total.height, child.height + 1);
    // Saturating: a shared object nested a few dozen times "contains" more than 2**64 items.
    total.items = child.items > max_tree_items_ - total.items ? max_tree_items_ + 1
                                                              : total.items + child.items;
    if (total.items > max_tree_items_) too_many_items();
  }
  [[noreturn]] void too_many_items() const;
  [[noreturn]] void too_deep() const;
  [[noreturn]] static void recursive(PickleKind kind);
  void check_into(const Ref& ref, std::size_t depth, Shape& shape);
  enum class Stage : std::uint8_t { unbuilt, building, built };
  // A container met by build_into() or check_into(): false when it was walked before (`shape`
  // becomes its shape, checked against the depth); throws for a cycle or nesting too deep.
  bool enter(Stage& stage, const Shape& walked, PickleKind kind, std::size_t depth,
             Shape& shape) const;
  void memo_get_sparse(std::uint64_t index);

  std::size_t max_bytes_;
  std::size_t max_depth_;
  std::uint64_t max_tree_items_;
  std::size_t used_bytes_ = 0;
  std::vector<Ref> stack_;
  std::vector<std::size_t> marks_;
  // The memo: dense for the indices pickles use (0, 1, 2...), a map for far-flung ones.
  std::vector<MemoSlot> memo_;
  std::unordered_map<std::uint64_t, Ref> sparse_memo_;
  std::uint64_t memo_count_ = 0;     // entries stored: MEMOIZE's next index
  std::deque<std::string> strings_;  // str (UTF-8) and bytes payloads; addresses stay put
  std::vector<const std::string*> string_ptrs_;  // strings_[i], without the deque's arithmetic
  std::unordered_map<std::string_view, std::size_t> str_index_;  // interning
  std::unordered_map<std::string_view, std::size_t> bytes_index_;
  std::vector<Sequence> sequences_;  // tuples and lists
  std::vector<Dict> dicts_;
  // build()'s progress per container: a container met again while it is being built is a cycle.
  struct Built {
    Stage stage = Stage::unbuilt;
    Shape shape;
    PickleValue value;
  };
  std::vector<Built> built_sequences_;
  std::vector<Built> built_dicts_;
  struct Checked {
    Stage stage = Stage::unbuilt;
    Shape shape;
  };
  std::vector<Checked> checked_sequences_;  // check()'s progress, as build()'s above
  std::vector<Checked> checked_dicts_;
};

}  // namespace memscope::detail
