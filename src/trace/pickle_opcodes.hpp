// The pickle opcodes (protocols 0 to 5), one row each: X(enumerator, byte, pickletools' name,
// the reader's handler). The enum the writer emits, the names in the reader's messages and the
// reader's dispatch (pickle_reader.cpp, which defines the handlers) are all expanded from it.
#pragma once

#include <cstdint>
#include <string>

// clang-format off
#define MEMSCOPE_PICKLE_OPCODES(X) \
  X(kProto, 0x80, "PROTO", proto)                              \
  X(kFrame, 0x95, "FRAME", frame)                              \
  X(kStop, 0x2e, "STOP", stop)                                 \
  X(kNone, 0x4e, "NONE", none)                                 \
  X(kNewtrue, 0x88, "NEWTRUE", boolean<true>)                  \
  X(kNewfalse, 0x89, "NEWFALSE", boolean<false>)               \
  X(kInt, 0x49, "INT", int_line)                               \
  X(kBinint, 0x4a, "BININT", binint)                           \
  X(kBinint1, 0x4b, "BININT1", binint_unsigned<1>)             \
  X(kBinint2, 0x4d, "BININT2", binint_unsigned<2>)             \
  X(kLong, 0x4c, "LONG", long_line)                            \
  X(kLong1, 0x8a, "LONG1", long1)                              \
  X(kLong4, 0x8b, "LONG4", long4)                              \
  X(kFloat, 0x46, "FLOAT", float_line)                         \
  X(kBinfloat, 0x47, "BINFLOAT", binfloat)                     \
  X(kString, 0x53, "STRING", string_line)                      \
  X(kBinstring, 0x54, "BINSTRING", binstring)                  \
  X(kShortBinstring, 0x55, "SHORT_BINSTRING", short_binstring) \
  X(kUnicode, 0x56, "UNICODE", unicode_line)                   \
  X(kShortBinunicode, 0x8c, "SHORT_BINUNICODE", binunicode<1>) \
  X(kBinunicode, 0x58, "BINUNICODE", binunicode<4>)            \
  X(kBinunicode8, 0x8d, "BINUNICODE8", binunicode<8>)          \
  X(kShortBinbytes, 0x43, "SHORT_BINBYTES", binbytes<1>)       \
  X(kBinbytes, 0x42, "BINBYTES", binbytes<4>)                  \
  X(kBinbytes8, 0x8e, "BINBYTES8", binbytes<8>)                \
  X(kBytearray8, 0x96, "BYTEARRAY8", binbytes<8>)              \
  X(kNextBuffer, 0x97, "NEXT_BUFFER", refuse_buffer)           \
  X(kReadonlyBuffer, 0x98, "READONLY_BUFFER", refuse_buffer)   \
  X(kEmptyList, 0x5d, "EMPTY_LIST", empty_sequence<false>)     \
  X(kList, 0x6c, "LIST", marked_sequence<false>)               \
  X(kAppend, 0x61, "APPEND", append)                           \
  X(kAppends, 0x65, "APPENDS", appends)                        \
  X(kEmptyTuple, 0x29, "EMPTY_TUPLE", empty_sequence<true>)    \
  X(kTuple, 0x74, "TUPLE", marked_sequence<true>)              \
  X(kTuple1, 0x85, "TUPLE1", small_tuple<1>)                   \
  X(kTuple2, 0x86, "TUPLE2", small_tuple<2>)                   \
  X(kTuple3, 0x87, "TUPLE3", small_tuple<3>)                   \
  X(kEmptyDict, 0x7d, "EMPTY_DICT", empty_dict)                \
  X(kDict, 0x64, "DICT", dict)                                 \
  X(kSetitem, 0x73, "SETITEM", setitem)                        \
  X(kSetitems, 0x75, "SETITEMS", setitems)                     \
  X(kEmptySet, 0x8f, "EMPTY_SET", refuse_set)                  \
  X(kAdditems, 0x90, "ADDITEMS", refuse_set)                   \
  X(kFrozenset, 0x91, "FROZENSET", refuse_set)                 \
  X(kPop, 0x30, "POP", pop)                                    \
  X(kDup, 0x32, "DUP", dup)                                    \
  X(kMark, 0x28, "MARK", mark)                                 \
  X(kPopMark, 0x31, "POP_MARK", pop_mark)                      \
  X(kGet, 0x67, "GET", get_line)                               \
  X(kBinget, 0x68, "BINGET", binget<1>)                        \
  X(kLongBinget, 0x6a, "LONG_BINGET", binget<4>)               \
  X(kPut, 0x70, "PUT", put_line)                               \
  X(kBinput, 0x71, "BINPUT", binput<1>)                        \
  X(kLongBinput, 0x72, "LONG_BINPUT", binput<4>)               \
  X(kMemoize, 0x94, "MEMOIZE", memoize)                        \
  X(kGlobal, 0x63, "GLOBAL", refuse_code)                      \
  X(kStackGlobal, 0x93, "STACK_GLOBAL", refuse_code)           \
  X(kReduce, 0x52, "REDUCE", refuse_code)                      \
  X(kBuild, 0x62, "BUILD", refuse_code)                        \
  X(kInst, 0x69, "INST", refuse_code)                          \
  X(kObj, 0x6f, "OBJ", refuse_code)                            \
  X(kNewobj, 0x81, "NEWOBJ", refuse_code)                      \
  X(kNewobjEx, 0x92, "NEWOBJ_EX", refuse_code)                 \
  X(kExt1, 0x82, "EXT1", refuse_code)                          \
  X(kExt2, 0x83, "EXT2", refuse_code)                          \
  X(kExt4, 0x84, "EXT4", refuse_code)                          \
  X(kPersid, 0x50, "PERSID", refuse_code)                      \
  X(kBinpersid, 0x51, "BINPERSID", refuse_code)
// clang-format on

namespace memscope::detail {

#define MEMSCOPE_PICKLE_OP_ENUMERATOR(op, byte, name, handler) op = (byte),
enum class Op : std::uint8_t { MEMSCOPE_PICKLE_OPCODES(MEMSCOPE_PICKLE_OP_ENUMERATOR) };
#undef MEMSCOPE_PICKLE_OP_ENUMERATOR

// pickletools' name ("SHORT_BINUNICODE"), or nullptr for a byte that is no opcode.
[[nodiscard]] constexpr const char* opcode_name(std::uint8_t byte) noexcept {
  switch (static_cast<Op>(byte)) {
#define MEMSCOPE_PICKLE_OP_NAME(op, code, name, handler) \
  case Op::op:                                           \
    return name;
    MEMSCOPE_PICKLE_OPCODES(MEMSCOPE_PICKLE_OP_NAME)
#undef MEMSCOPE_PICKLE_OP_NAME
  }
  return nullptr;
}

// "GLOBAL (0x63 'c')" or "unknown opcode 0xff": how messages name an opcode byte.
[[nodiscard]] std::string describe_opcode(std::uint8_t byte);

}  // namespace memscope::detail
