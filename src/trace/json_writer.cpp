#include "trace/json_writer.hpp"

#include <charconv>
#include <string>

#include "memscope/errors.hpp"
#include "trace/pickle_writer.hpp"

namespace memscope::detail {

void JsonWriter::before_value() {
  if (open_.empty()) return;
  const Open& top = open_.back();
  if (top.object && top.done % 2 == 1) {
    out_ += ':';
  } else if (top.done > 0) {
    out_ += ',';
  }
}

void JsonWriter::after_value() {
  while (!open_.empty()) {
    Open& top = open_.back();
    if (++top.done < top.values) return;
    out_ += top.object ? '}' : ']';
    open_.pop_back();  // complete: it was a value of its parent
  }
}

void JsonWriter::scalar(std::string_view literal) {
  before_value();
  out_ += literal;
  after_value();
}

void JsonWriter::integer(std::int64_t value) {
  char buf[24];
  const auto end = std::to_chars(buf, buf + sizeof buf, value).ptr;
  scalar(std::string_view(buf, static_cast<std::size_t>(end - buf)));
}

void JsonWriter::natural(std::uint64_t value) {
  char buf[24];
  const auto end = std::to_chars(buf, buf + sizeof buf, value).ptr;
  scalar(std::string_view(buf, static_cast<std::size_t>(end - buf)));
}

void JsonWriter::text(std::string_view value) {
  static constexpr char kHex[] = "0123456789abcdef";
  before_value();
  out_ += '"';
  for (const char c : valid_utf8(value)) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out_ += '\\';
      out_ += c;
    } else if (u < 0x20) {
      out_ += "\\u00";
      out_ += kHex[u >> 4];
      out_ += kHex[u & 0xF];
    } else {
      out_ += c;
    }
  }
  out_ += '"';
  after_value();
}

void JsonWriter::pair(std::int64_t a, std::int64_t b) {
  open(false, 2);
  integer(a);
  integer(b);
}

void JsonWriter::open(bool object, std::size_t values) {
  before_value();
  out_ += object ? '{' : '[';
  if (values == 0) {
    out_ += object ? '}' : ']';
    after_value();
    return;
  }
  open_.push_back({object, values, 0});
}

std::string JsonWriter::finish() {
  if (!open_.empty()) {
    throw UsageError("JsonWriter::finish: a container still expects " +
                     std::to_string(open_.back().values - open_.back().done) + " values");
  }
  return std::move(out_);
}

}  // namespace memscope::detail
