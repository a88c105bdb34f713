#include "trace/pickle_machine.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

#include "trace/pickle_input.hpp"

namespace memscope::detail {
namespace {

// What one hash-map entry costs beyond its key, roughly: node, bucket and allocator overhead.
constexpr std::size_t kMapEntryBytes = 64;

void append_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i, v >>= 8) out.push_back(static_cast<char>(v & 0xFF));
}

}  // namespace

PickleMachine::PickleMachine(std::size_t max_bytes, std::size_t max_depth,
                             std::uint64_t max_tree_items)
    : max_bytes_(max_bytes), max_depth_(max_depth), max_tree_items_(max_tree_items) {}

void PickleMachine::charge(std::size_t bytes) {
  if (bytes > max_bytes_ - used_bytes_) {
    throw PickleProblem("reading it would take more than the memory budget of " +
                        std::to_string(max_bytes_) +
                        " bytes (a pickle that shares one object many times can expand without "
                        "bound; raise PickleLimits::max_bytes if the input is trusted)");
  }
  used_bytes_ += bytes;
}

void PickleMachine::push(const Ref& ref) {
  charge(sizeof(Ref));
  stack_.push_back(ref);
}

Ref PickleMachine::pop() {
  if (stack_.size() <= fence()) throw PickleProblem("stack underflow (nothing to pop)");
  const Ref ref = stack_.back();
  stack_.pop_back();
  return ref;
}

const Ref& PickleMachine::top() const {
  if (stack_.size() <= fence()) throw PickleProblem("stack underflow (no object on the stack)");
  return stack_.back();
}

void PickleMachine::mark() {
  charge(sizeof(std::size_t));
  marks_.push_back(stack_.size());
}

std::vector<Ref> PickleMachine::pop_to_mark() {
  if (marks_.empty()) throw PickleProblem("no MARK on the stack");
  const std::size_t start = marks_.back();
  marks_.pop_back();
  std::vector<Ref> items(stack_.begin() + static_cast<std::ptrdiff_t>(start), stack_.end());
  stack_.resize(start);
  return items;
}

void PickleMachine::pop_item_or_mark() {
  if (stack_.size() > fence()) {
    stack_.pop_back();
  } else if (!marks_.empty()) {
    marks_.pop_back();
  } else {
    throw PickleProblem("stack underflow (nothing to pop)");
  }
}

Ref PickleMachine::make_string(std::string text, bool is_bytes) {
  charge(sizeof(std::string) + text.size());
  strings_.push_back(std::move(text));
  Ref ref;
  ref.kind = is_bytes ? PickleKind::bytes : PickleKind::string;
  ref.index = strings_.size() - 1;
  return ref;
}

Ref PickleMachine::make_sequence(std::vector<Ref> items, bool is_tuple) {
  charge(sizeof(Sequence) + items.size() * sizeof(Ref));
  sequences_.push_back(Sequence{std::move(items), is_tuple});
  Ref ref;
  ref.kind = is_tuple ? PickleKind::tuple : PickleKind::list;
  ref.index = sequences_.size() - 1;
  return ref;
}

Ref PickleMachine::make_dict() {
  charge(sizeof(Dict));
  dicts_.emplace_back();
  Ref ref;
  ref.kind = PickleKind::dict;
  ref.index = dicts_.size() - 1;
  return ref;
}

void PickleMachine::append(const Ref& list, const Ref& item) {
  if (list.kind != PickleKind::list) {
    throw PickleProblem(std::string("cannot append to a ") + python_type_name(list.kind));
  }
  charge(sizeof(Ref));
  sequences_[list.index].items.push_back(item);
}

void PickleMachine::set_item(const Ref& dict, const Ref& key, const Ref& value) {
  if (dict.kind != PickleKind::dict) {
    throw PickleProblem(std::string("cannot set an item of a ") + python_type_name(dict.kind));
  }
  std::string code;
  key_code(key, 0, code);
  charge(code.size() + kMapEntryBytes + sizeof(std::pair<Ref, Ref>));
  Dict& d = dicts_[dict.index];
  const auto [it, inserted] = d.positions.try_emplace(std::move(code), d.items.size());
  if (inserted) {
    d.items.emplace_back(key, value);
  } else {
    d.items[it->second].second = value;  // Python keeps the first key and the last value
  }
}

void PickleMachine::key_code(const Ref& key, std::size_t depth, std::string& out) {
  if (depth > max_depth_) {
    throw PickleProblem("a dict key nests deeper than " + std::to_string(max_depth_) + " levels");
  }
  switch (key.kind) {
    case PickleKind::none:
      out.push_back('N');
      return;
    case PickleKind::boolean:
    case PickleKind::integer:
      out.push_back('I');
      append_u64(out, static_cast<std::uint64_t>(key.integer));
      return;
    case PickleKind::real:
      // 2.0 and 2 are one key in Python.
      if (std::isfinite(key.real) && std::trunc(key.real) == key.real &&
          std::fabs(key.real) < 9.2e18) {
        out.push_back('I');
        append_u64(out, static_cast<std::uint64_t>(static_cast<std::int64_t>(key.real)));
      } else {
        out.push_back('F');
        append_u64(out, std::bit_cast<std::uint64_t>(key.real));
      }
      return;
    case PickleKind::string:
    case PickleKind::bytes: {
      const std::string& s = strings_[key.index];
      charge(s.size());
      out.push_back(key.kind == PickleKind::string ? 'S' : 'B');
      append_u64(out, s.size());
      out += s;
      return;
    }
    case PickleKind::tuple: {
      const std::vector<Ref>& items = sequences_[key.index].items;
      out.push_back('T');
      append_u64(out, items.size());
      for (const Ref& item : items) key_code(item, depth + 1, out);
      return;
    }
    case PickleKind::list:
    case PickleKind::dict:
      throw PickleProblem(std::string("unhashable dict key of type ") + python_type_name(key.kind));
  }
}

void PickleMachine::memo_put(std::uint64_t index) {
  const Ref& value = top();
  charge(kMapEntryBytes);
  memo_[index] = value;
}

void PickleMachine::memo_get(std::uint64_t index) {
  const auto it = memo_.find(index);
  if (it == memo_.end()) {
    throw PickleProblem("memo key " + std::to_string(index) + " was never stored");
  }
  push(it->second);
}

PickleValue PickleMachine::build(const Ref& root) {
  built_sequences_.assign(sequences_.size(), Built{});
  built_dicts_.assign(dicts_.size(), Built{});
  Shape shape;
  return build(root, 0, shape);
}

PickleValue PickleMachine::build(const Ref& ref, std::size_t depth, Shape& shape) {
  shape = Shape{};
  switch (ref.kind) {
    case PickleKind::none:
      return PickleValue{};
    case PickleKind::boolean:
      return PickleValue{ref.integer != 0};
    case PickleKind::integer:
      return PickleValue{ref.integer};
    case PickleKind::real:
      return PickleValue{ref.real};
    case PickleKind::string:
      charge(strings_[ref.index].size());
      return PickleValue{strings_[ref.index]};
    case PickleKind::bytes:
      charge(strings_[ref.index].size());
      return PickleValue{PickleBytes{strings_[ref.index]}};
    case PickleKind::tuple:
    case PickleKind::list:
    case PickleKind::dict:
      break;
  }
  const auto too_deep = [this] {
    return PickleProblem("the value nests containers deeper than " + std::to_string(max_depth_) +
                         " levels (PickleLimits::max_depth)");
  };
  const bool is_dict = ref.kind == PickleKind::dict;
  // The vectors are sized once in build(root): this reference stays valid while recursing.
  Built& node = is_dict ? built_dicts_[ref.index] : built_sequences_[ref.index];
  if (node.stage == Stage::building) {
    throw PickleProblem(std::string("the value is recursive (a ") + python_type_name(ref.kind) +
                        " contains itself); only acyclic plain data is read");
  }
  if (node.stage == Stage::built) {  // shared: reuse it, but it still counts for the nesting
    if (depth + node.shape.height > max_depth_) throw too_deep();
    shape = node.shape;
    return node.value;
  }
  if (depth >= max_depth_) throw too_deep();
  node.stage = Stage::building;
  Shape total{1, 1};
  const auto add = [&](const Shape& child) {
    total.height = std::max(total.height, child.height + 1);
    // Saturating: a shared object nested a few dozen times "contains" more than 2**64 items.
    total.items = child.items > max_tree_items_ - total.items ? max_tree_items_ + 1
                                                              : total.items + child.items;
    if (total.items > max_tree_items_) {
      throw PickleProblem(
          "walked as a tree, the value would hold more than " + std::to_string(max_tree_items_) +
          " items (an object shared many times over; PickleLimits::max_tree_items)");
    }
  };
  Shape child;
  if (is_dict) {
    const auto& items = dicts_[ref.index].items;
    charge(items.size() * sizeof(PickleDict::Item));
    std::vector<PickleDict::Item> out;
    out.reserve(items.size());
    for (const auto& [key, value] : items) {
      PickleValue k = build(key, depth + 1, child);
      add(child);
      PickleValue v = build(value, depth + 1, child);
      add(child);
      out.emplace_back(std::move(k), std::move(v));
    }
    node.value = PickleValue{PickleDict(std::move(out))};
  } else {
    const auto& items = sequences_[ref.index].items;
    charge(items.size() * sizeof(PickleValue));
    std::vector<PickleValue> out;
    out.reserve(items.size());
    for (const Ref& item : items) {
      out.push_back(build(item, depth + 1, child));
      add(child);
    }
    if (ref.kind == PickleKind::tuple) {
      node.value = PickleValue{PickleTuple(std::move(out))};
    } else {
      node.value = PickleValue{PickleList(std::move(out))};
    }
  }
  node.shape = total;
  node.stage = Stage::built;
  shape = total;
  return node.value;
}

}  // namespace memscope::detail
