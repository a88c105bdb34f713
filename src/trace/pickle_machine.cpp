#include "trace/pickle_machine.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

#include "trace/pickle_input.hpp"

namespace memscope::detail {
namespace {

// What one hash-map entry costs beyond its key, roughly: node, bucket and allocator overhead.
constexpr std::size_t kMapEntryBytes = 64;
// Dicts up to this many keys, all scalars, find duplicates by a scan (PyTorch's have about 8).
constexpr std::size_t kScannedKeys = 16;
// MEMOIZE and PUT count up from 0; an index this far past the dense part goes to the map.
constexpr std::uint64_t kDenseMemoGap = 4096;

void append_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i, v >>= 8) out.push_back(static_cast<char>(v & 0xFF));
}

}  // namespace

PickleMachine::PickleMachine(std::size_t max_bytes, std::size_t max_depth,
                             std::uint64_t max_tree_items)
    : max_bytes_(max_bytes), max_depth_(max_depth), max_tree_items_(max_tree_items) {}

void PickleMachine::over_budget() const {
  throw PickleProblem("reading it would take more than the memory budget of " +
                      std::to_string(max_bytes_) +
                      " bytes (a pickle that shares one object many times can expand without "
                      "bound; raise PickleLimits::max_bytes if the input is trusted)");
}

void PickleMachine::underflow(const char* what) {
  throw PickleProblem(std::string("stack underflow (") + what + ")");
}

void PickleMachine::mark() {
  charge(sizeof(std::size_t));
  marks_.push_back(stack_.size());
}

std::size_t PickleMachine::pop_mark() {
  if (marks_.empty()) throw PickleProblem("no MARK on the stack");
  const std::size_t start = marks_.back();
  marks_.pop_back();
  return start;
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

Ref PickleMachine::make_string(std::string_view text, bool is_bytes) {
  auto& index = is_bytes ? bytes_index_ : str_index_;
  const auto found = index.find(text);
  std::size_t at = 0;
  if (found != index.end()) {
    at = found->second;
  } else {
    charge(sizeof(std::string) + sizeof(const std::string*) + text.size() + kMapEntryBytes);
    strings_.emplace_back(text);
    string_ptrs_.push_back(&strings_.back());
    at = strings_.size() - 1;
    index.emplace(strings_.back(), at);
  }
  return Ref{is_bytes ? PickleKind::bytes : PickleKind::string, at};
}

Ref PickleMachine::make_string(std::string&& text, bool is_bytes) {
  return make_string(std::string_view(text), is_bytes);
}

Ref PickleMachine::make_sequence(const Ref* items, std::size_t n, bool is_tuple) {
  charge(sizeof(Sequence) + n * sizeof(Ref));
  sequences_.push_back(Sequence{std::vector<Ref>(items, items + n), is_tuple});
  return Ref{is_tuple ? PickleKind::tuple : PickleKind::list, sequences_.size() - 1};
}

Ref PickleMachine::make_dict() {
  charge(sizeof(Dict));
  dicts_.emplace_back();
  return Ref{PickleKind::dict, dicts_.size() - 1};
}

void PickleMachine::append(const Ref& list, const Ref* items, std::size_t n) {
  if (list.kind != PickleKind::list) {
    throw PickleProblem(std::string("cannot append to a ") + python_type_name(list.kind));
  }
  charge(n * sizeof(Ref));
  std::vector<Ref>& to = sequences_[list.index()].items;
  to.insert(to.end(), items, items + n);
}

bool PickleMachine::same_scalar_key(const Ref& a, const Ref& b) noexcept {
  // The common case first: str keys, interned, so equal exactly when their indices are.
  if (a.kind == PickleKind::string && b.kind == PickleKind::string) return a.bits == b.bits;
  // Numbers compare by value across bool, int and float, as key_code() encodes them.
  const auto number = [](const Ref& r, bool& integral, std::uint64_t& code) {
    if (r.kind == PickleKind::boolean || r.kind == PickleKind::integer) {
      integral = true;
      code = r.bits;
      return true;
    }
    if (r.kind != PickleKind::real) return false;
    const double v = r.real();
    integral = std::isfinite(v) && std::trunc(v) == v && std::fabs(v) < 9.2e18;
    code = integral ? static_cast<std::uint64_t>(static_cast<std::int64_t>(v)) : r.bits;
    return true;
  };
  bool ai = false, bi = false;
  std::uint64_t ac = 0, bc = 0;
  if (number(a, ai, ac)) return number(b, bi, bc) && ai == bi && ac == bc;
  return a.kind == b.kind && (a.kind == PickleKind::none || a.bits == b.bits);
}

void PickleMachine::index_dict(Dict& d) {
  d.index = std::make_unique<std::unordered_map<std::string, std::size_t>>();
  std::string code;
  for (std::size_t i = 0; i < d.items.size(); ++i) {
    code.clear();
    key_code(d.items[i].first, 0, code);
    charge(code.size() + kMapEntryBytes);
    d.index->try_emplace(code, i);
  }
}

void PickleMachine::set_items(const Ref& dict, const Ref* pairs, std::size_t n) {
  if (n == 0) return;
  if (dict.kind != PickleKind::dict) set_item(dict, pairs[0], pairs[1]);  // says what is wrong
  Dict& d = dicts_[dict.index()];
  // Not charged: set_item() charges each item, and the n pairs are on the stack already.
  d.items.reserve(d.items.size() + n);
  for (std::size_t i = 0; i < n; ++i) set_item(d, pairs[2 * i], pairs[2 * i + 1]);
}

void PickleMachine::set_item(const Ref& dict, const Ref& key, const Ref& value) {
  if (dict.kind != PickleKind::dict) {
    throw PickleProblem(std::string("cannot set an item of a ") + python_type_name(dict.kind));
  }
  set_item(dicts_[dict.index()], key, value);
}

void PickleMachine::set_item(Dict& d, const Ref& key, const Ref& value) {
  const bool scalar =
      key.kind != PickleKind::tuple && key.kind != PickleKind::list && key.kind != PickleKind::dict;
  if (d.index == nullptr && key.kind == PickleKind::string && d.items.size() < kScannedKeys) {
    // The common case: a str key (interned) equals only the str key of the same index.
    for (auto& [k, v] : d.items) {
      if (k.kind == PickleKind::string && k.bits == key.bits) {
        v = value;  // Python keeps the first key and the last value
        return;
      }
    }
    charge(sizeof(std::pair<Ref, Ref>));
    d.items.emplace_back(key, value);
    return;
  }
  if (d.index == nullptr && scalar && d.items.size() < kScannedKeys) {
    for (auto& [k, v] : d.items) {
      if (same_scalar_key(k, key)) {
        v = value;  // Python keeps the first key and the last value
        return;
      }
    }
    charge(sizeof(std::pair<Ref, Ref>));
    d.items.emplace_back(key, value);
    return;
  }
  if (d.index == nullptr) index_dict(d);
  std::string code;
  key_code(key, 0, code);
  charge(code.size() + kMapEntryBytes + sizeof(std::pair<Ref, Ref>));
  const auto [it, inserted] = d.index->try_emplace(std::move(code), d.items.size());
  if (inserted) {
    d.items.emplace_back(key, value);
  } else {
    d.items[it->second].second = value;
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
      append_u64(out, key.bits);
      return;
    case PickleKind::real:
      // 2.0 and 2 are one key in Python.
      if (std::isfinite(key.real()) && std::trunc(key.real()) == key.real() &&
          std::fabs(key.real()) < 9.2e18) {
        out.push_back('I');
        append_u64(out, static_cast<std::uint64_t>(static_cast<std::int64_t>(key.real())));
      } else {
        out.push_back('F');
        append_u64(out, key.bits);
      }
      return;
    case PickleKind::string:
    case PickleKind::bytes:
    case PickleKind::big_integer: {
      const std::string& s = *string_ptrs_[key.index()];
      charge(s.size());
      out.push_back(key.kind == PickleKind::string  ? 'S'
                    : key.kind == PickleKind::bytes ? 'B'
                                                    : 'L');
      append_u64(out, s.size());
      out += s;
      return;
    }
    case PickleKind::tuple: {
      const std::vector<Ref>& items = sequences_[key.index()].items;
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
  if (index < memo_.size() + kDenseMemoGap) {
    if (index >= memo_.size()) {
      charge((index + 1 - memo_.size()) * sizeof(MemoSlot));
      memo_.resize(index + 1);
    }
    if (!memo_[index].set) ++memo_count_;
    memo_[index] = MemoSlot{value, true};
    return;
  }
  charge(kMapEntryBytes);
  if (sparse_memo_.insert_or_assign(index, value).second) ++memo_count_;
}

void PickleMachine::memo_get_sparse(std::uint64_t index) {
  const auto it = sparse_memo_.find(index);
  if (it == sparse_memo_.end()) {
    throw PickleProblem("memo key " + std::to_string(index) + " was never stored");
  }
  push(it->second);
}

PickleValue PickleMachine::build(const Ref& root) {
  built_sequences_.assign(sequences_.size(), Built{});
  built_dicts_.assign(dicts_.size(), Built{});
  Shape shape;
  PickleValue out;
  build_into(root, 0, shape, out);
  return out;
}

void PickleMachine::too_many_items() const {
  throw PickleProblem("walked as a tree, the value would hold more than " +
                      std::to_string(max_tree_items_) +
                      " items (an object shared many times over; PickleLimits::max_tree_items)");
}

void PickleMachine::too_deep() const {
  throw PickleProblem("the value nests containers deeper than " + std::to_string(max_depth_) +
                      " levels (PickleLimits::max_depth)");
}

void PickleMachine::recursive(PickleKind kind) {
  throw PickleProblem(std::string("the value is recursive (a ") + python_type_name(kind) +
                      " contains itself); only acyclic plain data is read");
}

bool PickleMachine::enter(Stage& stage, const Shape& walked, PickleKind kind, std::size_t depth,
                          Shape& shape) const {
  if (stage == Stage::building) recursive(kind);
  if (stage == Stage::built) {  // shared: reuse it, but it still counts for the nesting
    if (depth + walked.height > max_depth_) too_deep();
    shape = walked;
    return false;
  }
  if (depth >= max_depth_) too_deep();
  stage = Stage::building;
  return true;
}

void PickleMachine::check(const Ref& root) {
  checked_sequences_.assign(sequences_.size(), Checked{});
  checked_dicts_.assign(dicts_.size(), Checked{});
  Shape shape;
  check_into(root, 0, shape);
}

// build_into()'s walk and checks, in the same order, without the values.
void PickleMachine::check_into(const Ref& ref, std::size_t depth, Shape& shape) {
  shape = Shape{};
  if (ref.kind != PickleKind::tuple && ref.kind != PickleKind::list &&
      ref.kind != PickleKind::dict) {
    return;
  }
  const bool is_dict = ref.kind == PickleKind::dict;
  Checked& node = is_dict ? checked_dicts_[ref.index()] : checked_sequences_[ref.index()];
  if (!enter(node.stage, node.shape, ref.kind, depth, shape)) return;
  Shape total{1, 1};
  Shape child;
  const auto add = [&](const Ref& item) {
    if (item.kind == PickleKind::tuple || item.kind == PickleKind::list ||
        item.kind == PickleKind::dict) {
      check_into(item, depth + 1, child);
      add_child(total, child);
    } else if (++total.items > max_tree_items_) {  // a scalar: add_child() of one item
      too_many_items();
    }
  };
  if (is_dict) {
    for (const auto& [key, value] : dicts_[ref.index()].items) {
      add(key);
      add(value);
    }
  } else {
    for (const Ref& item : sequences_[ref.index()].items) add(item);
  }
  node.shape = total;
  node.stage = Stage::built;
  shape = total;
}

// Builds into `out` (a None): values are made in place, never moved from a temporary.
void PickleMachine::build_into(const Ref& ref, std::size_t depth, Shape& shape, PickleValue& out) {
  shape = Shape{};
  switch (ref.kind) {
    case PickleKind::none:
      return;
    case PickleKind::boolean:
      out.data.emplace<bool>(ref.bits != 0);
      return;
    case PickleKind::integer:
      out.data.emplace<std::int64_t>(ref.integer());
      return;
    case PickleKind::real:
      out.data.emplace<double>(ref.real());
      return;
    case PickleKind::string:
      charge(string_ptrs_[ref.index()]->size());
      out.data.emplace<std::string>(*string_ptrs_[ref.index()]);
      return;
    case PickleKind::bytes:
      charge(string_ptrs_[ref.index()]->size());
      out.data.emplace<PickleBytes>(PickleBytes{*string_ptrs_[ref.index()]});
      return;
    case PickleKind::big_integer:
      charge(string_ptrs_[ref.index()]->size());
      out.data.emplace<PickleBigInt>(PickleBigInt{*string_ptrs_[ref.index()]});
      return;
    case PickleKind::tuple:
    case PickleKind::list:
    case PickleKind::dict:
      break;
  }
  const bool is_dict = ref.kind == PickleKind::dict;
  // The vectors are sized once in build(root): this reference stays valid while recursing.
  Built& node = is_dict ? built_dicts_[ref.index()] : built_sequences_[ref.index()];
  if (!enter(node.stage, node.shape, ref.kind, depth, shape)) {
    out = node.value;
    return;
  }
  Shape total{1, 1};
  Shape child;
  if (is_dict) {
    const auto& items = dicts_[ref.index()].items;
    charge(items.size() * sizeof(PickleDict::Item));
    std::vector<PickleDict::Item> built(items.size());
    for (std::size_t i = 0; i < items.size(); ++i) {
      build_into(items[i].first, depth + 1, child, built[i].first);
      add_child(total, child);
      build_into(items[i].second, depth + 1, child, built[i].second);
      add_child(total, child);
    }
    node.value.data.emplace<PickleDict>(std::move(built));
  } else {
    const auto& items = sequences_[ref.index()].items;
    charge(items.size() * sizeof(PickleValue));
    std::vector<PickleValue> built(items.size());
    for (std::size_t i = 0; i < items.size(); ++i) {
      build_into(items[i], depth + 1, child, built[i]);
      add_child(total, child);
    }
    if (ref.kind == PickleKind::tuple) {
      node.value.data.emplace<PickleTuple>(std::move(built));
    } else {
      node.value.data.emplace<PickleList>(std::move(built));
    }
  }
  node.shape = total;
  node.stage = Stage::built;
  shape = total;
  out = node.value;
}

}  // namespace memscope::detail
