// JSON text that never refuses a string (report_json.hpp).
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/utf8.hpp"
#include "memscope/report_json.hpp"

namespace memscope::report {
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

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The value of the \uXXXX escape at text[i] (text[i] == '\\'), or -1.
int escape_at(std::string_view text, std::size_t i) {
  if (i + 6 > text.size() || text[i + 1] != 'u') return -1;
  int value = 0;
  for (std::size_t k = 2; k < 6; ++k) {
    const int h = hex_value(text[i + k]);
    if (h < 0) return -1;
    value = value * 16 + h;
  }
  return value;
}

// Rewrites each lone \udc80-\udcff inside strings as \udbff\udfXY (U+10FFXY); false when there
// was none (the text is then left as it was).
bool rewrite_lone_byte_escapes(std::string_view text, std::string& out) {
  bool rewrote = false;
  bool in_string = false;
  bool after_high = false;  // the previous escape was a high surrogate: a pair, keep it
  std::size_t copied = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (!in_string) {
      in_string = c == '"';
      continue;
    }
    if (c == '"') {
      in_string = false;
      after_high = false;
      continue;
    }
    if (c != '\\') {
      after_high = false;
      continue;
    }
    const int value = escape_at(text, i);
    if (value < 0) {  // another escape (\n, \\, \"): skip its second character
      ++i;
      after_high = false;
      continue;
    }
    if (value >= 0xDC80 && value <= 0xDCFF && !after_high) {
      if (!rewrote) out.reserve(text.size() + 64);
      out.append(text.substr(copied, i - copied));
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\udbff\\udf";
      out += kHex[(value >> 4) & 15];
      out += kHex[value & 15];
      copied = i + 6;
      rewrote = true;
    }
    after_high = value >= 0xD800 && value <= 0xDBFF;
    i += 5;
  }
  if (rewrote) out.append(text.substr(copied));
  return rewrote;
}

// U+10FF80-U+10FFFF (F4 8F BE/BF xx) back to the byte each stands for.
std::string restore_bytes(const std::string& s) {
  if (s.find('\xF4') == std::string::npos) return s;
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
    if (i + 4 <= s.size() && b(0) == 0xF4 && b(1) == 0x8F && (b(2) == 0xBE || b(2) == 0xBF) &&
        (b(3) & 0xC0) == 0x80) {
      const unsigned low = ((b(2) & 0x3FU) << 6) | (b(3) & 0x3FU);  // 0xF80..0xFFF
      out += static_cast<char>(low & 0xFFU);
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

void restore(nlohmann::json& json) {
  if (json.is_string()) {
    json = restore_bytes(json.get_ref<const std::string&>());
  } else if (json.is_array()) {
    for (nlohmann::json& item : json) restore(item);
  } else if (json.is_object()) {
    nlohmann::json rebuilt = nlohmann::json::object();
    for (auto& [key, value] : json.items()) {
      restore(value);
      rebuilt[restore_bytes(key)] = std::move(value);
    }
    json = std::move(rebuilt);
  }
}

}  // namespace

nlohmann::json parse_json_text(std::string_view text, bool allow_exceptions) {
  std::string rewritten;
  if (!rewrite_lone_byte_escapes(text, rewritten)) {
    return nlohmann::json::parse(text, nullptr, allow_exceptions);
  }
  nlohmann::json json = nlohmann::json::parse(rewritten, nullptr, allow_exceptions);
  if (!json.is_discarded()) restore(json);
  return json;
}

std::string json_text(const nlohmann::json& json, int indent) {
  std::string out;
  write(out, json, indent, 0);
  return out;
}

}  // namespace memscope::report
