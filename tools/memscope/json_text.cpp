// JSON text that never refuses a string (json_text.hpp).
#include "json_text.hpp"

#include "common/utf8.hpp"

namespace memscope::cli {
namespace {

void write(std::string& out, const nlohmann::json& json, int indent, int depth) {
  const auto newline = [&](int level) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<std::size_t>(indent) * static_cast<std::size_t>(level), ' ');
  };
  if (json.is_object()) {
    if (json.empty()) {
      out += "{}";
      return;
    }
    out += '{';
    bool first = true;
    for (const auto& [key, value] : json.items()) {
      if (!first) out += ',';
      first = false;
      newline(depth + 1);
      detail::append_json_string(out, key);
      out += indent < 0 ? ":" : ": ";
      write(out, value, indent, depth + 1);
    }
    newline(depth);
    out += '}';
  } else if (json.is_array()) {
    if (json.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    bool first = true;
    for (const nlohmann::json& value : json) {
      if (!first) out += ',';
      first = false;
      newline(depth + 1);
      write(out, value, indent, depth + 1);
    }
    newline(depth);
    out += ']';
  } else if (json.is_string()) {
    detail::append_json_string(out, json.get_ref<const std::string&>());
  } else {
    out += json.dump();  // numbers (NaN and infinities as null), booleans, null
  }
}

}  // namespace

std::string json_text(const nlohmann::json& json, int indent) {
  std::string out;
  write(out, json, indent, 0);
  return out;
}

}  // namespace memscope::cli
