#include "trace/json_writer.hpp"

#include <charconv>
#include <string>
#include <utility>

#include "common/utf8.hpp"
#include "memscope/errors.hpp"

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
    if (top.keep != nullptr) top.keep->assign(out_, top.start);
    open_.pop_back();  // complete: it was a value of its parent
  }
}

bool JsonWriter::fetch(unsigned kind, std::uint32_t id) {
  const std::vector<std::string>& known = shared_.at(kind);
  if (id >= known.size() || known[id].empty()) return false;
  before_value();
  out_ += known[id];
  after_value();
  return true;
}

void JsonWriter::share(unsigned kind, std::uint32_t id) {
  std::vector<std::string>& known = shared_.at(kind);
  if (id >= known.size()) known.resize(std::size_t{id} + 1);
  pending_ = &known[id];
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
  std::string fixed;
  const std::string_view utf8 = as_valid_utf8(value, fixed);
  before_value();
  out_ += '"';
  std::size_t plain = 0;  // start of the run not yet copied
  for (std::size_t i = 0; i < utf8.size(); ++i) {
    const auto u = static_cast<unsigned char>(utf8[i]);
    if (u >= 0x20 && u != '"' && u != '\\') continue;
    out_.append(utf8.substr(plain, i - plain));
    plain = i + 1;
    if (u < 0x20) {
      out_ += "\\u00";
      out_ += kHex[u >> 4];
      out_ += kHex[u & 0xF];
    } else {
      out_ += '\\';
      out_ += static_cast<char>(u);
    }
  }
  out_.append(utf8.substr(plain));
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
  std::string* keep = std::exchange(pending_, nullptr);
  const std::size_t start = out_.size();
  out_ += object ? '{' : '[';
  if (values == 0) {
    out_ += object ? '}' : ']';
    if (keep != nullptr) keep->assign(out_, start);
    after_value();
    return;
  }
  open_.push_back({object, values, 0, keep, start});
}

std::string JsonWriter::finish() {
  if (!open_.empty()) {
    throw UsageError("JsonWriter::finish: a container still expects " +
                     std::to_string(open_.back().values - open_.back().done) + " values");
  }
  return std::move(out_);
}

}  // namespace memscope::detail
