// The pickle opcodes (protocols 0 to 5), named as Python's pickletools names them, and which of
// them are refused because they import or call code. Kept apart from the reader so error messages
// and tests share one table.
#pragma once

#include <cstdint>
#include <string>

namespace memscope::detail {

enum class Op : std::uint8_t {
  kInt = 0x49,
  kBinint = 0x4a,
  kBinint1 = 0x4b,
  kBinint2 = 0x4d,
  kLong = 0x4c,
  kLong1 = 0x8a,
  kLong4 = 0x8b,
  kString = 0x53,
  kBinstring = 0x54,
  kShortBinstring = 0x55,
  kBinbytes = 0x42,
  kShortBinbytes = 0x43,
  kBinbytes8 = 0x8e,
  kBytearray8 = 0x96,
  kNextBuffer = 0x97,
  kReadonlyBuffer = 0x98,
  kNone = 0x4e,
  kNewtrue = 0x88,
  kNewfalse = 0x89,
  kUnicode = 0x56,
  kShortBinunicode = 0x8c,
  kBinunicode = 0x58,
  kBinunicode8 = 0x8d,
  kFloat = 0x46,
  kBinfloat = 0x47,
  kEmptyList = 0x5d,
  kAppend = 0x61,
  kAppends = 0x65,
  kList = 0x6c,
  kEmptyTuple = 0x29,
  kTuple = 0x74,
  kTuple1 = 0x85,
  kTuple2 = 0x86,
  kTuple3 = 0x87,
  kEmptyDict = 0x7d,
  kDict = 0x64,
  kSetitem = 0x73,
  kSetitems = 0x75,
  kEmptySet = 0x8f,
  kAdditems = 0x90,
  kFrozenset = 0x91,
  kPop = 0x30,
  kDup = 0x32,
  kMark = 0x28,
  kPopMark = 0x31,
  kGet = 0x67,
  kBinget = 0x68,
  kLongBinget = 0x6a,
  kPut = 0x70,
  kBinput = 0x71,
  kLongBinput = 0x72,
  kMemoize = 0x94,
  kExt1 = 0x82,
  kExt2 = 0x83,
  kExt4 = 0x84,
  kGlobal = 0x63,
  kStackGlobal = 0x93,
  kReduce = 0x52,
  kBuild = 0x62,
  kInst = 0x69,
  kObj = 0x6f,
  kNewobj = 0x81,
  kNewobjEx = 0x92,
  kProto = 0x80,
  kStop = 0x2e,
  kFrame = 0x95,
  kPersid = 0x50,
  kBinpersid = 0x51,
};

// pickletools' name ("SHORT_BINUNICODE"), or nullptr for a byte that is no opcode.
[[nodiscard]] constexpr const char* opcode_name(std::uint8_t byte) noexcept {
  switch (static_cast<Op>(byte)) {
    case Op::kInt:
      return "INT";
    case Op::kBinint:
      return "BININT";
    case Op::kBinint1:
      return "BININT1";
    case Op::kBinint2:
      return "BININT2";
    case Op::kLong:
      return "LONG";
    case Op::kLong1:
      return "LONG1";
    case Op::kLong4:
      return "LONG4";
    case Op::kString:
      return "STRING";
    case Op::kBinstring:
      return "BINSTRING";
    case Op::kShortBinstring:
      return "SHORT_BINSTRING";
    case Op::kBinbytes:
      return "BINBYTES";
    case Op::kShortBinbytes:
      return "SHORT_BINBYTES";
    case Op::kBinbytes8:
      return "BINBYTES8";
    case Op::kBytearray8:
      return "BYTEARRAY8";
    case Op::kNextBuffer:
      return "NEXT_BUFFER";
    case Op::kReadonlyBuffer:
      return "READONLY_BUFFER";
    case Op::kNone:
      return "NONE";
    case Op::kNewtrue:
      return "NEWTRUE";
    case Op::kNewfalse:
      return "NEWFALSE";
    case Op::kUnicode:
      return "UNICODE";
    case Op::kShortBinunicode:
      return "SHORT_BINUNICODE";
    case Op::kBinunicode:
      return "BINUNICODE";
    case Op::kBinunicode8:
      return "BINUNICODE8";
    case Op::kFloat:
      return "FLOAT";
    case Op::kBinfloat:
      return "BINFLOAT";
    case Op::kEmptyList:
      return "EMPTY_LIST";
    case Op::kAppend:
      return "APPEND";
    case Op::kAppends:
      return "APPENDS";
    case Op::kList:
      return "LIST";
    case Op::kEmptyTuple:
      return "EMPTY_TUPLE";
    case Op::kTuple:
      return "TUPLE";
    case Op::kTuple1:
      return "TUPLE1";
    case Op::kTuple2:
      return "TUPLE2";
    case Op::kTuple3:
      return "TUPLE3";
    case Op::kEmptyDict:
      return "EMPTY_DICT";
    case Op::kDict:
      return "DICT";
    case Op::kSetitem:
      return "SETITEM";
    case Op::kSetitems:
      return "SETITEMS";
    case Op::kEmptySet:
      return "EMPTY_SET";
    case Op::kAdditems:
      return "ADDITEMS";
    case Op::kFrozenset:
      return "FROZENSET";
    case Op::kPop:
      return "POP";
    case Op::kDup:
      return "DUP";
    case Op::kMark:
      return "MARK";
    case Op::kPopMark:
      return "POP_MARK";
    case Op::kGet:
      return "GET";
    case Op::kBinget:
      return "BINGET";
    case Op::kLongBinget:
      return "LONG_BINGET";
    case Op::kPut:
      return "PUT";
    case Op::kBinput:
      return "BINPUT";
    case Op::kLongBinput:
      return "LONG_BINPUT";
    case Op::kMemoize:
      return "MEMOIZE";
    case Op::kExt1:
      return "EXT1";
    case Op::kExt2:
      return "EXT2";
    case Op::kExt4:
      return "EXT4";
    case Op::kGlobal:
      return "GLOBAL";
    case Op::kStackGlobal:
      return "STACK_GLOBAL";
    case Op::kReduce:
      return "REDUCE";
    case Op::kBuild:
      return "BUILD";
    case Op::kInst:
      return "INST";
    case Op::kObj:
      return "OBJ";
    case Op::kNewobj:
      return "NEWOBJ";
    case Op::kNewobjEx:
      return "NEWOBJ_EX";
    case Op::kProto:
      return "PROTO";
    case Op::kStop:
      return "STOP";
    case Op::kFrame:
      return "FRAME";
    case Op::kPersid:
      return "PERSID";
    case Op::kBinpersid:
      return "BINPERSID";
  }
  return nullptr;
}

// Opcodes that import a name, call an object or ask the caller for one: never executed.
[[nodiscard]] constexpr bool opcode_runs_code(std::uint8_t byte) noexcept {
  switch (static_cast<Op>(byte)) {
    case Op::kGlobal:
    case Op::kStackGlobal:
    case Op::kReduce:
    case Op::kBuild:
    case Op::kInst:
    case Op::kObj:
    case Op::kNewobj:
    case Op::kNewobjEx:
    case Op::kExt1:
    case Op::kExt2:
    case Op::kExt4:
    case Op::kPersid:
    case Op::kBinpersid:
      return true;
    default:
      return false;
  }
}

// "GLOBAL (0x63 'c')" or "unknown opcode 0xff": how messages name an opcode byte.
[[nodiscard]] std::string describe_opcode(std::uint8_t byte);

}  // namespace memscope::detail
