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

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "memscope/pickle.hpp"

namespace memscope::detail {

struct Ref {
  PickleKind kind = PickleKind::none;
  std::int64_t integer = 0;  // bool and int
  double real = 0.0;
  std::size_t index = 0;  // into the arena, for str, bytes, tuple, list and dict
};

class PickleMachine {
 public:
  PickleMachine(std::size_t max_bytes, std::size_t max_depth, std::uint64_t max_tree_items);

  // ---- stack and marks (a pop never reaches below the innermost mark) ----
  void push(const Ref& ref);
  [[nodiscard]] Ref pop();
  [[nodiscard]] const Ref& top() const;
  void mark();
  [[nodiscard]] std::vector<Ref> pop_to_mark();
  // POP: the top item, or the innermost mark when nothing is above it (Python's rule).
  void pop_item_or_mark();

  // ---- building ----
  [[nodiscard]] Ref make_string(std::string text, bool is_bytes);
  [[nodiscard]] Ref make_sequence(std::vector<Ref> items, bool is_tuple);
  [[nodiscard]] Ref make_dict();
  void append(const Ref& list, const Ref& item);
  void set_item(const Ref& dict, const Ref& key, const Ref& value);

  // ---- memo ----
  void memo_put(std::uint64_t index);  // the top of the stack
  void memoize() { memo_put(memo_.size()); }
  void memo_get(std::uint64_t index);  // pushes

  // The finished value `root`; shared objects stay shared, cycles are refused.
  [[nodiscard]] PickleValue build(const Ref& root);

 private:
  struct Sequence {
    std::vector<Ref> items;
    bool is_tuple = false;
  };
  struct Dict {
    std::vector<std::pair<Ref, Ref>> items;
    std::unordered_map<std::string, std::size_t> positions;  // key_code(key) -> item
  };

  void charge(std::size_t bytes);
  [[nodiscard]] std::size_t fence() const noexcept { return marks_.empty() ? 0 : marks_.back(); }
  // A byte string equal for keys Python's dict treats as equal (1 == 1.0 == True); throws for
  // unhashable keys.
  void key_code(const Ref& key, std::size_t depth, std::string& out);
  // The size of a value walked as a tree: containers nested in it, including itself (0 for a
  // scalar), and items counting every appearance of a shared object.
  struct Shape {
    std::size_t height = 0;
    std::uint64_t items = 1;
  };
  [[nodiscard]] PickleValue build(const Ref& ref, std::size_t depth, Shape& shape);

  std::size_t max_bytes_;
  std::size_t max_depth_;
  std::uint64_t max_tree_items_;
  std::size_t used_bytes_ = 0;
  std::vector<Ref> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<std::uint64_t, Ref> memo_;
  std::vector<std::string> strings_;  // str (UTF-8) and bytes payloads
  std::vector<Sequence> sequences_;   // tuples and lists
  std::vector<Dict> dicts_;
  // build()'s progress per container: a container met again while it is being built is a cycle.
  enum class Stage : std::uint8_t { unbuilt, building, built };
  struct Built {
    Stage stage = Stage::unbuilt;
    Shape shape;
    PickleValue value;
  };
  std::vector<Built> built_sequences_;
  std::vector<Built> built_dicts_;
};

}  // namespace memscope::detail
