// The opcode loop of the safe pickle reader: decodes each opcode's argument with PickleInput,
// applies it to the PickleMachine, and refuses code opcodes before they do anything.
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
constexpr std::size_t kBaseBudget = 64 * MiB;
constexpr std::size_t kBudgetPerInputByte = 128;
constexpr std::uint64_t kBaseTreeItems = std::uint64_t{16} << 20;
constexpr std::uint64_t kTreeItemsPerInputByte = 1024;

Ref scalar(PickleKind kind, std::int64_t value) {
  return Ref{kind, static_cast<std::uint64_t>(value)};
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

Ref real(double value) {
  return Ref{PickleKind::real, std::bit_cast<std::uint64_t>(value)};
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

// An opcode that is not plain data: refused before it does anything.
[[noreturn, gnu::cold]] void refuse(std::uint8_t byte) {
  if (opcode_runs_code(byte)) {
    throw PickleProblem(
        "this opcode imports or calls code and is refused: a pickle is code in disguise, and "
        "memscope reads plain data only (None, bool, int, float, str, bytes, tuple, list, dict)");
  }
  throw PickleProblem("not a pickle opcode (corrupt input, or not a pickle)");
}

// Runs one opcode. Returns true at STOP, with the pickled value in `root`. Inlined into the
// loop of run_pickle (one call less per opcode); code opcodes reach `default`, and refuse().
[[gnu::always_inline]] inline bool execute(std::uint8_t byte, PickleInput& in, PickleMachine& m,
                                           Ref& root) {
  switch (static_cast<Op>(byte)) {
    case Op::kProto: {
      const std::uint64_t protocol = in.uint_le(1);
      if (protocol > kHighestProtocol) {
        throw PickleProblem("protocol " + std::to_string(protocol) + " is newer than 5");
      }
      return false;
    }
    case Op::kFrame: {
      const std::uint64_t n = in.uint_le(8);
      if (n > in.remaining()) {
        throw PickleProblem("frame of " + std::to_string(n) + " bytes but only " +
                            std::to_string(in.remaining()) + " remain (truncated input)");
      }
      return false;
    }
    case Op::kStop:
      root = m.pop();
      return true;
    case Op::kNone:
      m.push(Ref{});
      return false;
    case Op::kNewtrue:
      m.push(scalar(PickleKind::boolean, 1));
      return false;
    case Op::kNewfalse:
      m.push(scalar(PickleKind::boolean, 0));
      return false;
    case Op::kInt: {
      const std::string_view text = in.line();
      // Protocol 0 writes bools as INT 01 and 00.
      if (text == "00" || text == "01") {
        m.push(scalar(PickleKind::boolean, text == "01"));
      } else {
        m.push(decimal_value(m, text));
      }
      return false;
    }
    case Op::kBinint:
      m.push(scalar(PickleKind::integer, in.int32_le()));
      return false;
    case Op::kBinint1:
      m.push(scalar(PickleKind::integer, static_cast<std::int64_t>(in.uint_le(1))));
      return false;
    case Op::kBinint2:
      m.push(scalar(PickleKind::integer, static_cast<std::int64_t>(in.uint_le(2))));
      return false;
    case Op::kLong: {
      std::string_view text = in.line();
      if (!text.empty() && text.back() == 'L') text.remove_suffix(1);
      m.push(decimal_value(m, text));
      return false;
    }
    case Op::kLong1:
      m.push(long_value(m, in.bytes(in.uint_le(1))));
      return false;
    case Op::kLong4:
      m.push(long_value(m, in.bytes(signed_length(in.int32_le()))));
      return false;
    case Op::kFloat:
      m.push(real(parse_float(in.line())));
      return false;
    case Op::kBinfloat:
      m.push(real(in.float_be()));
      return false;
    case Op::kString:
      m.push(m.make_string(decode_string_literal(in.line()), false));
      return false;
    case Op::kBinstring:
      m.push(m.make_string(latin1_to_utf8(in.bytes(signed_length(in.int32_le()))), false));
      return false;
    case Op::kShortBinstring:
      m.push(m.make_string(latin1_to_utf8(in.bytes(in.uint_le(1))), false));
      return false;
    case Op::kUnicode:
      m.push(m.make_string(decode_raw_unicode_escape(in.line()), false));
      return false;
    case Op::kShortBinunicode:
      m.push(m.make_string(utf8(in.bytes(in.uint_le(1))), false));
      return false;
    case Op::kBinunicode:
      m.push(m.make_string(utf8(in.bytes(in.uint_le(4))), false));
      return false;
    case Op::kBinunicode8:
      m.push(m.make_string(utf8(in.bytes(in.uint_le(8))), false));
      return false;
    case Op::kShortBinbytes:
      m.push(m.make_string(in.bytes(in.uint_le(1)), true));
      return false;
    case Op::kBinbytes:
      m.push(m.make_string(in.bytes(in.uint_le(4)), true));
      return false;
    case Op::kBinbytes8:
    case Op::kBytearray8:
      m.push(m.make_string(in.bytes(in.uint_le(8)), true));
      return false;
    case Op::kEmptyList:
      m.push(m.make_sequence(nullptr, 0, false));
      return false;
    case Op::kList:
      m.push(sequence_from(m, m.pop_mark(), false));
      return false;
    case Op::kAppend: {
      const Ref item = m.pop();
      m.append(m.top(), &item, 1);
      return false;
    }
    case Op::kAppends: {
      const std::size_t start = m.pop_mark();
      m.append(m.below(start), m.items_from(start), m.stack_size() - start);
      m.truncate(start);
      return false;
    }
    case Op::kEmptyTuple:
      m.push(m.make_sequence(nullptr, 0, true));
      return false;
    case Op::kTuple:
      m.push(sequence_from(m, m.pop_mark(), true));
      return false;
    case Op::kTuple1:
    case Op::kTuple2:
    case Op::kTuple3: {
      const std::size_t n =
          static_cast<std::size_t>(byte) - static_cast<std::size_t>(Op::kTuple1) + 1;
      std::array<Ref, 3> items{};
      for (std::size_t i = n; i-- > 0;) items[i] = m.pop();
      m.push(m.make_sequence(items.data(), n, true));
      return false;
    }
    case Op::kEmptyDict:
      m.push(m.make_dict());
      return false;
    case Op::kDict: {
      const std::size_t start = m.pop_mark();
      const Ref dict = m.make_dict();
      set_items_from(m, dict, start);
      m.push(dict);
      return false;
    }
    case Op::kSetitem: {
      const Ref value = m.pop();
      const Ref key = m.pop();
      m.set_item(m.top(), key, value);
      return false;
    }
    case Op::kSetitems: {
      const std::size_t start = m.pop_mark();
      set_items_from(m, m.below(start), start);
      return false;
    }
    case Op::kPop:
      m.pop_item_or_mark();
      return false;
    case Op::kDup:
      m.push(m.top());
      return false;
    case Op::kMark:
      m.mark();
      return false;
    case Op::kPopMark:
      m.truncate(m.pop_mark());
      return false;
    case Op::kGet:
      m.memo_get(parse_index(in.line()));
      return false;
    case Op::kBinget:
      m.memo_get(in.uint_le(1));
      return false;
    case Op::kLongBinget:
      m.memo_get(in.uint_le(4));
      return false;
    case Op::kPut:
      m.memo_put(parse_index(in.line()));
      return false;
    case Op::kBinput:
      m.memo_put(in.uint_le(1));
      return false;
    case Op::kLongBinput:
      m.memo_put(in.uint_le(4));
      return false;
    case Op::kMemoize:
      m.memoize();
      return false;
    case Op::kEmptySet:
    case Op::kAdditems:
    case Op::kFrozenset:
      throw PickleProblem(
          "sets are not supported (memscope reads None, bool, int, float, str, "
          "bytes, tuple, list and dict)");
    case Op::kNextBuffer:
    case Op::kReadonlyBuffer:
      throw PickleProblem("out-of-band buffers (protocol 5) are not supported");
    default:
      refuse(byte);
  }
}

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
