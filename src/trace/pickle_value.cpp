#include <cstdio>
#include <string>

#include "memscope/pickle.hpp"
#include "trace/pickle_opcodes.hpp"

namespace memscope {

PickleDict::PickleDict(std::vector<Item> items)
    : items_(std::make_shared<const std::vector<Item>>(std::move(items))) {}

const std::vector<PickleDict::Item>& PickleDict::items() const noexcept {
  static const std::vector<Item> kEmpty;
  return items_ ? *items_ : kEmpty;
}

bool operator==(const PickleDict& a, const PickleDict& b) {
  return a.items_ == b.items_ || a.items() == b.items();
}

const PickleValue* PickleDict::find(std::string_view key) const noexcept {
  for (const auto& [k, v] : items()) {
    const auto* text = k.get_if<std::string>();
    if (text != nullptr && *text == key) return &v;
  }
  return nullptr;
}

const char* python_type_name(PickleKind kind) noexcept {
  switch (kind) {
    case PickleKind::none:
      return "NoneType";
    case PickleKind::boolean:
      return "bool";
    case PickleKind::integer:
    case PickleKind::big_integer:
      return "int";
    case PickleKind::real:
      return "float";
    case PickleKind::string:
      return "str";
    case PickleKind::bytes:
      return "bytes";
    case PickleKind::tuple:
      return "tuple";
    case PickleKind::list:
      return "list";
    case PickleKind::dict:
      return "dict";
  }
  return "?";
}

std::string_view PickleValue::type_name() const noexcept {
  return python_type_name(kind());
}

const PickleValue* PickleValue::find(std::string_view key) const noexcept {
  const auto* dict = get_if<PickleDict>();
  return dict != nullptr ? dict->find(key) : nullptr;
}

namespace detail {

std::string describe_opcode(std::uint8_t byte) {
  char code[16];
  if (byte >= 0x20 && byte < 0x7F) {
    std::snprintf(code, sizeof code, "0x%02x '%c'", byte, byte);
  } else {
    std::snprintf(code, sizeof code, "0x%02x", byte);
  }
  const char* name = opcode_name(byte);
  return name != nullptr ? std::string(name) + " (" + code + ")"
                         : std::string("unknown opcode ") + code;
}

}  // namespace detail
}  // namespace memscope
