// The safe pickle reader: a handler per opcode (decodes its argument with PickleInput and applies
// it to the PickleMachine; code opcodes are refused before they do anything), the opcode loop
// that dispatches on MEMSCOPE_PICKLE_OPCODES, and the error that names the opcode and offset.
#include <array>
#include <bit>
#include <functional>
#include <string>

#include "memscope/errors.hpp"
#include "memscope/pickle.hpp"
#include "memscope/trace.hpp"
#include "memscope/units.hpp"
#include "trace/pickle_input.hpp"
#include "trace/pickle_machine.hpp"
#include "trace/pickle_opcodes.hpp"
#include "trace/pickle_run.hpp"
#include "trace/pickle_text.hpp"

namespace memscope {
namespace detail {
namespace {

constexpr std::uint64_t kHighestProtocol = 5;

Ref scalar(PickleKind kind, std::int64_t value) {
  return Ref{kind, static_cast<std::uint64_t>(value)};
}

Ref real(double value) {
  return Ref{PickleKind::real, std::bit_cast<std::uint64_t>(value)};
}

// An int of any size: LONG1/LONG4's two's complement bytes.
Ref long_value(PickleMachine& m, std::string_view bytes) {
  std::int64_t value = 0;
  if (decode_long(bytes, value)) return scalar(PickleKind::integer, value);
  return m.make_big_integer(long_decimal(bytes));
}

// An int of any size written in decimal (INT, LONG of protocol 0).
Ref decimal_value(PickleMachine& m, std::string_view text) {
  std::string_view digits = text;
  if (!digits.empty() && (digits.front() == '-' || digits.front() == '+')) digits.remove_prefix(1);
  const bool decimal =
      !digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos;
  try {
    return scalar(PickleKind::integer, parse_decimal(text));
  } catch (const PickleProblem&) {
    if (!decimal) throw;  // not a number at all: parse_decimal's complaint
    return m.make_big_integer(normalize_decimal(text));
  }
}

std::uint64_t signed_length(std::int32_t n) {
  if (n < 0) throw PickleProblem("negative length " + std::to_string(n));
  return static_cast<std::uint64_t>(n);
}

// The payload, checked (no copy: make_string() copies it once, if it is new).
std::string_view utf8(std::string_view payload) {
  check_utf8(payload);
  return payload;
}

// SETITEMS and DICT: the key/value pairs above the innermost mark go into `dict`.
void set_items_from(PickleMachine& m, const Ref& dict, std::size_t start) {
  const std::size_t n = m.stack_size() - start;
  if (n % 2 != 0) throw PickleProblem("odd number of items for a dict");
  m.set_items(dict, m.items_from(start), n / 2);
  m.truncate(start);
}

// LIST and TUPLE: the items above the innermost mark become the sequence.
Ref sequence_from(PickleMachine& m, std::size_t start, bool is_tuple) {
  const Ref seq = m.make_sequence(m.items_from(start), m.stack_size() - start, is_tuple);
  m.truncate(start);
  return seq;
}

// ---- framing ----
bool proto(PickleInput& in, PickleMachine& /*m*/, Ref& /*root*/) {
  const std::uint64_t protocol = in.uint_le(1);
  if (protocol > kHighestProtocol) {
    throw PickleProblem("protocol " + std::to_string(protocol) + " is newer than 5");
  }
  return false;
}

bool frame(PickleInput& in, PickleMachine& /*m*/, Ref& /*root*/) {
  const std::uint64_t n = in.uint_le(8);
  if (n > in.remaining()) {
    throw PickleProblem("frame of " + std::to_string(n) + " bytes but only " +
                        std::to_string(in.remaining()) + " remain (truncated input)");
  }
  return false;
}

bool stop(PickleInput& /*in*/, PickleMachine& m, Ref& root) {
  root = m.pop();
  return true;
}

// ---- scalars ----
bool none(PickleInput& /*in*/, PickleMachine& m, Ref& /*root*/) {
  m.push(Ref{});
  return false;
}

template <bool kValue>
bool boolean(PickleInput& /*in*/, PickleMachine& m, Ref& /*root*/) {
  m.push(scalar(PickleKind::boolean, kValue ? 1 : 0));
  return false;
}

bool int_line(PickleInput& in, PickleMachine& m, Ref& /*root*/) {
  const std::string_view text = in.line();
  // Protocol 0 writes bools as INT 01 and 00.
  if (text == "00" || text == "01") {
    m.push(scalar(PickleKind::boolean, text == "01"));
  } else {
    m.push(decimal_value(m, text));
  }
  return false;
}

bool binint(PickleInput& in, PickleMachine& m, Ref& /*root*/) {
  m.push(scalar(PickleKind::integer, in.int32_le()));
  return false;
}

// BININT1, BININT2: an unsigned int of `kWidth` bytes.
template <std::size_t kWidth>
bool binint_unsigned(PickleInput& in, PickleMachine& m, Ref& /*root*/) {
  m.push(scalar(PickleKind::integer, static_cast<std::int64_t>(in.uint_le(kWidth))));
  return false;
}

bool long_line(PickleInput& in, PickleMachine& m, Ref& /*root*/) {
  std::string_view text = in.line();
  if (!text.empty() && text.back() == 'L') text.remove_suffix(1);
  m.push(decimal_value(m, text));
  return false;
}

bool long1(PickleInput& in, PickleMachine& m, Ref& /*root*/) {
  m.push(long_value(m, in.bytes(in.uint_le(1))));
  return false;
}

bool long4(PickleInput& in, PickleMachine& m, Ref& /*root*/) {
  m.push(long_value(m, in.bytes(signed_length(in.int32_le()))));
  return false;
}

bool float_line(PickleInput& in, PickleMachine& m, Ref& /*root*/) {
  m.push(real(parse_float(in.line())));
  return false;
}

bool binfloat(PickleInput& in, PickleMachine& m, Ref& /*root*/) {
  m.push(real(in.float_be()));
  return false;
}

// ---- str and bytes ----
bool string_line(PickleInput& in, PickleMachine& m, Ref& /*root*/) {
  m.push(m.make_string(decode_string_literal(in.line()), false));
  return false;
}

bool binstring(PickleInput& in, PickleMachine& m, Ref& /*root*/) {
  m.push(m.make_string(latin1_to_utf8(in.bytes(signed_length(in.int32_le()))), false));
  return false;
}

bool short_binstring(PickleInput& in, PickleMachine& m, Ref& /*root*/) {
  m.push(m.make_string(latin1_to_utf8(in.bytes(in.uint_le(1))), false));
  return false;
}

bool unicode_line(PickleInput& in, PickleMachine& m, Ref& /*root*/) {
  m.push(m.make_string(decode_raw_unicode_escape(in.line()), false));
  return false;
}

// SHORT_BINUNICODE, BINUNICODE, BINUNICODE8: UTF-8 after a length of `kWidth` bytes.
template <std::size_t kWidth>
bool binunicode(PickleInput& in, PickleMachine& m, Ref& /*root*/) {
  m.push(m.make_string(utf8(in.bytes(in.uint_le(kWidth))), false));
  return false;
}

// SHORT_BINBYTES, BINBYTES, BINBYTES8, BYTEARRAY8: bytes after a length of `kWidth` bytes.
template <std::size_t kWidth>
bool binbytes(PickleInput& in, PickleMachine& m, Ref& /*root*/) {
  m.push(m.make_string(in.bytes(in.uint_le(kWidth)), true));
  return false;
}

// ---- lists and tuples ----
template <bool kTuple>
bool empty_sequence(PickleInput& /*in*/, PickleMachine& m, Ref& /*root*/) {
  m.push(m.make_sequence(nullptr, 0, kTuple));
  return false;
}

// LIST and TUPLE: the items above the innermost mark.
template <bool kTuple>
bool marked_sequence(PickleInput& /*in*/, PickleMachine& m, Ref& /*root*/) {
  m.push(sequence_from(m, m.pop_mark(), kTuple));
  return false;
}

bool append(PickleInput& /*in*/, PickleMachine& m, Ref& /*root*/) {
  const Ref item = m.pop();
  m.append(m.top(), &item, 1);
  return false;
}

bool appends(PickleInput& /*in*/, PickleMachine& m, Ref& /*root*/) {
  const std::size_t start = m.pop_mark();
  m.append(m.below(start), m.items_from(start), m.stack_size() - start);
  m.truncate(start);
  return false;
}

// TUPLE1, TUPLE2, TUPLE3: the top `kSize` items.
template <std::size_t kSize>
bool small_tuple(PickleInput& /*in*/, PickleMachine& m, Ref& /*root*/) {
  std::array<Ref, kSize> items{};
  for (std::size_t i = kSize; i-- > 0;) items[i] = m.pop();
  m.push(m.make_sequence(items.data(), kSize, true));
  return false;
}

// ---- dicts ----
bool empty_dict(PickleInput& /*in*/, PickleMachine& m, Ref& /*root*/) {
  m.push(m.make_dict());
  return false;
}

bool dict(PickleInput& /*in*/, PickleMachine& m, Ref& /*root*/) {
  const std::size_t start = m.pop_mark();
  const Ref made = m.make_dict();
  set_items_from(m, made, start);
  m.push(made);
  return false;
}

bool setitem(PickleInput& /*in*/, PickleMachine& m, Ref& /*root*/) {
  const Ref value = m.pop();
  const Ref key = m.pop();
  m.set_item(m.top(), key, value);
  return false;
}

bool setitems(PickleInput& /*in*/, PickleMachine& m, Ref& /*root*/) {
  const std::size_t start = m.pop_mark();
  set_items_from(m, m.below(start), start);
  return false;
}

// ---- stack and memo ----
bool pop(PickleInput& /*in*/, PickleMachine& m, Ref& /*root*/) {
  m.pop_item_or_mark();
  return false;
}

bool dup(PickleInput& /*in*/, PickleMachine& m, Ref& /*root*/) {
  m.push(m.top());
  return false;
}

bool mark(PickleInput& /*in*/, PickleMachine& m, Ref& /*root*/) {
  m.mark();
  return false;
}

bool pop_mark(PickleInput& /*in*/, PickleMachine& m, Ref& /*root*/) {
  m.truncate(m.pop_mark());
  return false;
}

bool get_line(PickleInput& in, PickleMachine& m, Ref& /*root*/) {
  m.memo_get(parse_index(in.line()));
  return false;
}

// BINGET, LONG_BINGET: a memo index of `kWidth` bytes.
template <std::size_t kWidth>
bool binget(PickleInput& in, PickleMachine& m, Ref& /*root*/) {
  m.memo_get(in.uint_le(kWidth));
  return false;
}

bool put_line(PickleInput& in, PickleMachine& m, Ref& /*root*/) {
  m.memo_put(parse_index(in.line()));
  return false;
}

// BINPUT, LONG_BINPUT: a memo index of `kWidth` bytes.
template <std::size_t kWidth>
bool binput(PickleInput& in, PickleMachine& m, Ref& /*root*/) {
  m.memo_put(in.uint_le(kWidth));
  return false;
}

bool memoize(PickleInput& /*in*/, PickleMachine& m, Ref& /*root*/) {
  m.memoize();
  return false;
}

// ---- refused ----
[[noreturn, gnu::cold]] bool refuse_set(PickleInput& /*in*/, PickleMachine& /*m*/, Ref& /*root*/) {
  throw PickleProblem(
      "sets are not supported (memscope reads None, bool, int, float, str, bytes, tuple, list "
      "and dict)");
}

[[noreturn, gnu::cold]] bool refuse_buffer(PickleInput& /*in*/, PickleMachine& /*m*/,
                                           Ref& /*root*/) {
  throw PickleProblem("out-of-band buffers (protocol 5) are not supported");
}

// Opcodes that import a name, call an object or ask the caller for one: never executed.
[[noreturn, gnu::cold]] bool refuse_code(PickleInput& /*in*/, PickleMachine& /*m*/, Ref& /*root*/) {
  throw PickleProblem(
      "this opcode imports or calls code and is refused: a pickle is code in disguise, and "
      "memscope reads plain data only (None, bool, int, float, str, bytes, tuple, list, dict)");
}

[[noreturn, gnu::cold]] bool refuse_unknown(PickleInput& /*in*/, PickleMachine& /*m*/,
                                            Ref& /*root*/) {
  throw PickleProblem("not a pickle opcode (corrupt input, or not a pickle)");
}

// Runs one opcode: the handler its row in MEMSCOPE_PICKLE_OPCODES names. Returns true at STOP,
// with the pickled value in `root`. Inlined into the loop of run_pickle (one call less per
// opcode).
[[gnu::always_inline]] inline bool execute(std::uint8_t byte, PickleInput& in, PickleMachine& m,
                                           Ref& root) {
#define MEMSCOPE_PICKLE_OP_CASE(op, code, name, handler) \
  case Op::op:                                           \
    return handler(in, m, root);
  switch (static_cast<Op>(byte)) {
    // Rows that share a handler (code opcodes, sets, buffers) give cases alike, on purpose.
    // NOLINTNEXTLINE(bugprone-branch-clone)
    MEMSCOPE_PICKLE_OPCODES(MEMSCOPE_PICKLE_OP_CASE)
  }
#undef MEMSCOPE_PICKLE_OP_CASE
  return refuse_unknown(in, m, root);
}

constexpr std::size_t kBaseBudget = 64 * MiB;
constexpr std::size_t kBudgetPerInputByte = 128;
constexpr std::uint64_t kBaseTreeItems = std::uint64_t{16} << 20;
constexpr std::uint64_t kTreeItemsPerInputByte = 1024;

}  // namespace

[[gnu::flatten]] void run_pickle(std::string_view data, std::string_view source,
                                 const PickleLimits& limits,
                                 const std::function<void(PickleMachine&, const Ref&)>& at_stop) {
  const std::size_t budget =
      limits.max_bytes != 0 ? limits.max_bytes : kBaseBudget + kBudgetPerInputByte * data.size();
  PickleInput in(data);
  const std::uint64_t tree_items = limits.max_tree_items != 0
                                       ? limits.max_tree_items
                                       : kBaseTreeItems + kTreeItemsPerInputByte * data.size();
  PickleMachine machine(budget, limits.max_depth, tree_items);
  std::size_t offset = 0;
  std::uint8_t byte = 0;
  try {
    Ref root;
    while (true) {
      offset = in.offset();
      if (in.at_end()) break;
      byte = in.next_byte();
      if (execute(byte, in, machine, root)) {
        at_stop(machine, root);
        return;
      }
    }
  } catch (const PickleProblem& problem) {
    throw TraceFormatError(std::string(source) + ": " + describe_opcode(byte) + " at byte " +
                           std::to_string(offset) + ": " + problem.what());
  }
  throw TraceFormatError(std::string(source) + ": " +
                         (data.empty() ? std::string("empty input, not a pickle")
                                       : "input ends at byte " + std::to_string(data.size()) +
                                             " before the STOP opcode (truncated file?)"));
}

}  // namespace detail

PickleValue read_pickle(std::string_view data, std::string_view source,
                        const PickleLimits& limits) {
  PickleValue out;
  detail::run_pickle(
      data, source, limits,
      [&out](detail::PickleMachine& m, const detail::Ref& root) { out = m.build(root); });
  return out;
}

PickleValue read_pickle_file(const std::filesystem::path& path, const PickleLimits& limits) {
  return read_pickle(read_whole_file(path), path.string(), limits);
}

}  // namespace memscope
