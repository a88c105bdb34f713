// Plain data read from a Python pickle, by a reader that refuses code.
//
// A pickle is a program for a small stack machine, and some of its opcodes import names and call
// them: loading an untrusted pickle with Python's own pickle module can run anything. read_pickle()
// runs only the opcodes that build plain data (None, bool, int, float, str, bytes, tuple, list,
// dict, plus the stack, mark, memo and framing opcodes of protocols 0 to 5) and refuses every
// opcode that imports or calls (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ,
// NEWOBJ_EX, EXT1/2/4, PERSID, BINPERSID) when it reaches it, before anything is called.
//
// The result is a PickleValue: immutable plain data. An object the pickle shares (one list
// referenced from many places, as PyTorch snapshots share their stack frames) stays shared: the
// value is a directed acyclic graph whose containers are reference-counted, so reading never
// multiplies memory. A recursive structure (a list that contains itself) is refused. str values
// are UTF-8; protocol-0/1 byte strings (STRING, BINSTRING) are read as Latin-1; bytearray becomes
// bytes. Sets and protocol-5 out-of-band buffers are refused as unsupported. Bytes after STOP are
// ignored, as Python does.
//
// Bounded: every length is checked against the remaining input, nesting is limited
// (PickleLimits::max_depth), the memory the reader builds is capped (max_bytes), and so is the
// size of the value walked as a tree, every shared object counted each time it appears
// (max_tree_items). So a small hostile pickle cannot make the reader exhaust the stack or the
// heap, nor make code that walks the value recursively run for ever.
//
// Thread safety: the functions are pure. A PickleValue is immutable once built; copies share its
// containers (reference counts are atomic), so values may be read and copied from any thread.
// Ownership: a PickleValue owns its data, shared with its copies; nothing points into the input.
// Errors: TraceFormatError for anything that is not a well-formed plain-data pickle (refused or
// unknown opcode, truncated input, bad argument, stack misuse, an int of more than 4300 decimal
// digits (Python's own limit for printing one), nesting or size beyond the limits, unreadable
// file). Ints outside int64 are read as PickleBigInt (PyTorch under Python 3.13 writes frame lines
// of 2^64 - 1). The message names the source, the opcode and its
// byte offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace memscope {

class PickleValue;

struct PickleNone {
  friend bool operator==(PickleNone, PickleNone) = default;
};

// Python bytes (and bytearray): raw octets, kept apart from str.
struct PickleBytes {
  std::string data;
  friend bool operator==(const PickleBytes&, const PickleBytes&) = default;
};

// A Python int outside int64 (kind big_integer, Python type "int"): its decimal text, as
// Python's repr writes it ("18446744073709551615", "-9223372036854775809").
struct PickleBigInt {
  std::string decimal;
  friend bool operator==(const PickleBigInt&, const PickleBigInt&) = default;
};

// A tuple (kTuple) or a list: an immutable, shared sequence of values.
// (Members that need PickleValue complete are defined after it, below.)
template <bool kTuple>
class PickleSequence {
 public:
  PickleSequence() = default;
  explicit PickleSequence(std::vector<PickleValue> items);

  [[nodiscard]] const std::vector<PickleValue>& items() const noexcept;
  [[nodiscard]] std::size_t size() const noexcept;
  [[nodiscard]] const PickleValue& operator[](std::size_t i) const;  // throws out_of_range

  // Compares contents (a shared sequence is equal to itself without a walk).
  friend bool operator==(const PickleSequence& a, const PickleSequence& b) {
    return a.items_ == b.items_ || a.items() == b.items();
  }

 private:
  std::shared_ptr<const std::vector<PickleValue>> items_;  // null when empty
};
using PickleTuple = PickleSequence<true>;
using PickleList = PickleSequence<false>;

// A dict in insertion order: immutable and shared like the sequences. Keys are unique (a key set
// twice keeps its first position and its last value, as in Python); they are never lists or
// dicts (unhashable in Python).
class PickleDict {
 public:
  using Item = std::pair<PickleValue, PickleValue>;
  PickleDict() = default;
  explicit PickleDict(std::vector<Item> items);

  [[nodiscard]] const std::vector<Item>& items() const noexcept;
  [[nodiscard]] std::size_t size() const noexcept;
  // The value under the str key `key`, or nullptr.
  [[nodiscard]] const PickleValue* find(std::string_view key) const noexcept;
  friend bool operator==(const PickleDict& a, const PickleDict& b);

 private:
  std::shared_ptr<const std::vector<Item>> items_;  // null when empty
};

// big_integer is an int outside int64 (PickleBigInt); Python's type name for it is "int" too.
enum class PickleKind {
  none,
  boolean,
  integer,
  real,
  string,
  bytes,
  tuple,
  list,
  dict,
  big_integer
};

// Python's name for the kind: "NoneType", "bool", "int", "float", "str", "bytes", ...
[[nodiscard]] const char* python_type_name(PickleKind kind) noexcept;

class PickleValue {
 public:
  // The alternatives in PickleKind order; str is std::string (UTF-8).
  using Storage = std::variant<PickleNone, bool, std::int64_t, double, std::string, PickleBytes,
                               PickleTuple, PickleList, PickleDict, PickleBigInt>;

  PickleValue() = default;  // None
  // Implicit from any alternative, so values read like Python's: PickleValue v = 2.5;
  // The constraint keeps copies and moves on the real copy and move constructors.
  template <class T>
  requires std::is_constructible_v<Storage, T&&> &&
      (!std::is_same_v<std::remove_cvref_t<T>, PickleValue>)
      // NOLINTNEXTLINE(google-explicit-constructor,bugprone-forwarding-reference-overload)
      PickleValue(T&& value)
      : data(std::forward<T>(value)) {}

  [[nodiscard]] PickleKind kind() const noexcept { return static_cast<PickleKind>(data.index()); }
  // Python's name for the type: "NoneType", "bool", "int", "float", "str", "bytes", "tuple"...
  [[nodiscard]] std::string_view type_name() const noexcept;
  template <class T>
  [[nodiscard]] const T* get_if() const noexcept {
    return std::get_if<T>(&data);
  }
  // For a dict, the value under the str key `key`; nullptr otherwise.
  [[nodiscard]] const PickleValue* find(std::string_view key) const noexcept;

  friend bool operator==(const PickleValue&, const PickleValue&) = default;

  Storage data;
};

template <bool kTuple>
PickleSequence<kTuple>::PickleSequence(std::vector<PickleValue> items)
    : items_(std::make_shared<const std::vector<PickleValue>>(std::move(items))) {}

template <bool kTuple>
const std::vector<PickleValue>& PickleSequence<kTuple>::items() const noexcept {
  static const std::vector<PickleValue> kEmpty;
  return items_ ? *items_ : kEmpty;
}

template <bool kTuple>
std::size_t PickleSequence<kTuple>::size() const noexcept {
  return items().size();
}

template <bool kTuple>
const PickleValue& PickleSequence<kTuple>::operator[](std::size_t i) const {
  return items().at(i);
}

inline std::size_t PickleDict::size() const noexcept {
  return items().size();
}

struct PickleLimits {
  // Deepest nesting of containers in the result (a dict holding a list is depth 2); it also
  // bounds the recursion of anything that walks the value, including its destructor.
  std::size_t max_depth = 200;
  // Most bytes the reader may build (its stack, memo and the result together); 0 means
  // 64 MiB + 128 bytes per input byte. Shared objects are not copied, so real pickles stay far
  // below it (the 495 KB PyTorch snapshot in the corpus needs about 36 bytes per input byte).
  std::size_t max_bytes = 0;
  // Most items (scalars and containers, shared ones counted at each appearance) in the value
  // walked as a tree; 0 means 16 Mi + 1024 per input byte (the snapshot above: 0.4 per byte).
  std::uint64_t max_tree_items = 0;
};

// Reads one pickle from `data`; `source` names it in error messages (a file name).
[[nodiscard]] PickleValue read_pickle(std::string_view data, std::string_view source = "<memory>",
                                      const PickleLimits& limits = {});
// Reads the whole file and then read_pickle(); a file that cannot be read is a TraceFormatError.
[[nodiscard]] PickleValue read_pickle_file(const std::filesystem::path& path,
                                           const PickleLimits& limits = {});

}  // namespace memscope
