// RMM allocation logs (rmm::mr::logging_resource_adaptor) -> one device trace.
//
// The log is CSV: a header naming the columns Thread,Time,Action,Pointer,Size,Stream, then one
// row per event. RMM versions differ in the details, all accepted here: pointers as "0x7f..."
// (fmt, %p), bare hex (%llx), "(nil)" or "0x0" for the null pointer of an allocate failure;
// streams as hex, with or without 0x; times as HH:MM:SS.ffffff (spdlog's %H:%M:%S.%f) or as
// seconds since the epoch. Quoted fields ("free"), CRLF line ends, blank lines and a header
// repeated (two adaptors on one file) are accepted; anything else is a TraceFormatError naming
// the source, the line, the column and what was expected. One pass, linear in the input.
#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <deque>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "memscope/errors.hpp"
#include "memscope/trace.hpp"

namespace memscope {
namespace {

enum CsvColumn : std::size_t { kThread, kTime, kAction, kPointer, kSize, kStream, kColumns };
constexpr std::array<std::string_view, kColumns> kNames{"Thread",  "Time", "Action",
                                                        "Pointer", "Size", "Stream"};
constexpr const char* kHeader = "Thread,Time,Action,Pointer,Size,Stream";
constexpr std::int64_t kDayUs = std::int64_t{86'400'000'000};

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return (x | 0x20) == (y | 0x20);
         });
}

std::string_view trim_blanks(std::string_view s) {  // spaces and tabs only
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Shows a field in a message: quoted, cut short, control bytes escaped.
std::string shown(std::string_view text) {
  constexpr std::size_t kShown = 40;
  std::string out = "'";
  for (const char c : text.substr(0, kShown)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u >= 0x20 && u < 0x7F) ? std::string(1, c) : "\\x" + std::to_string(u);
  }
  return out + (text.size() > kShown ? "...'" : "'");
}

class LogReader {
 public:
  explicit LogReader(std::string_view source) : source_(source) {}

  [[noreturn]] void fail(std::size_t line, const std::string& problem) const {
    throw TraceFormatError(source_ + ": line " + std::to_string(line) + ": " + problem);
  }
  [[noreturn]] void fail(std::size_t line, std::size_t column, const std::string& problem) const {
    fail(line, "column " + std::to_string(column + 1) + " (" +
                   std::string(column < kColumns ? kNames[column] : "extra") + "): " + problem);
  }

  // Splits one line into fields: commas separate, a field in double quotes may hold commas and
  // "" for a quote. Unquoted fields are trimmed of spaces.
  void split(std::string_view line, std::size_t number) {
    fields_.clear();
    quoted_.clear();
    std::size_t i = 0;
    while (true) {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      if (i < line.size() && line[i] == '"') {
        std::string& field = quoted_.emplace_back();
        for (++i;; ++i) {
          if (i >= line.size()) {
            fail(number, "a quoted field has no closing '\"' (fields cannot span lines)");
          }
          if (line[i] == '"') {
            if (i + 1 < line.size() && line[i + 1] == '"') {
              field.push_back('"');
              ++i;
            } else {
              ++i;
              break;
            }
          } else {
            field.push_back(line[i]);
          }
        }
        while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
        if (i < line.size() && line[i] != ',') {
          fail(number, "text after the closing quote of field " +
                           std::to_string(fields_.size() + 1) + " (expected ',')");
        }
        fields_.push_back(field);
      } else {
        const std::size_t end = std::min(line.find(',', i), line.size());
        fields_.push_back(trim_blanks(line.substr(i, end - i)));
        i = end;
      }
      if (i >= line.size()) return;
      ++i;  // the comma
    }
  }

  // The header's columns; false when the line is not a header.
  bool read_header() {
    if (fields_.size() < kColumns) return false;
    std::array<bool, kColumns> found{};
    for (std::size_t i = 0; i < fields_.size(); ++i) {
      for (std::size_t c = 0; c < kColumns; ++c) {
        if (iequals(fields_[i], kNames[c]) && !found[c]) {
          found[c] = true;
          column_[c] = i;
        }
      }
    }
    return std::all_of(found.begin(), found.end(), [](bool f) { return f; });
  }

  TraceEvent read_row(std::size_t line) {
    if (fields_.size() != width_) {
      fail(line, "expected " + std::to_string(width_) + " comma-separated fields (" + kHeader +
                     "), found " + std::to_string(fields_.size()));
    }
    TraceEvent e;
    const std::string_view action = field(kAction);
    if (action == "allocate") {
      e.action = TraceAction::alloc;
    } else if (action == "free" || action == "deallocate") {
      e.action = TraceAction::free_completed;
    } else if (action == "allocate failure") {
      e.action = TraceAction::oom;
    } else {
      fail(line, kAction, "expected allocate, free or allocate failure, found " + shown(action));
    }
    e.size = decimal(line, kSize);
    e.stream = hex(line, kStream, "a stream");
    const std::uint64_t pointer = hex(line, kPointer, "an address");
    // An oom's addr holds the device's free bytes in the data model; RMM does not log them.
    e.addr = e.action == TraceAction::oom ? 0 : pointer;
    e.time_us = time_us(field(kTime));
    return e;
  }

  void set_width() { width_ = fields_.size(); }

 private:
  [[nodiscard]] std::string_view field(CsvColumn c) const { return fields_[column_[c]]; }

  std::uint64_t decimal(std::size_t line, CsvColumn c) const {
    const std::string_view text = field(c);
    std::uint64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) {
      fail(line, column_[c],
           std::string(ec == std::errc::result_out_of_range ? "beyond 64 bits: "
                                                            : "expected a decimal byte count, "
                                                              "found ") +
               shown(text));
    }
    return value;
  }

  std::uint64_t hex(std::size_t line, CsvColumn c, const char* what) const {
    std::string_view text = field(c);
    if (text == "(nil)" || text == "nullptr" || text == "(null)") return 0;
    if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
      text.remove_prefix(2);
    }
    std::uint64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) {
      fail(line, column_[c],
           std::string(ec == std::errc::result_out_of_range ? "beyond 64 bits: "
                                                            : "expected " + std::string(what) +
                                                                  " in hexadecimal (0x7f00...), "
                                                                  "found ") +
               shown(field(c)));
    }
    return value;
  }

  // Microseconds from "HH:MM:SS.ffffff" (time of day; a step back of more than 12 hours is taken
  // as midnight passing) or "1634567890.123456" (seconds since the epoch); 0 when neither.
  std::int64_t time_us(std::string_view text) {
    const auto number = [](std::string_view& s, std::int64_t& out) {
      std::int64_t v = 0;
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (ec != std::errc{} || end == s.data() || v < 0) return false;
      s.remove_prefix(static_cast<std::size_t>(end - s.data()));
      out = v;
      return true;
    };
    const auto micros = [](std::string_view s, std::int64_t& out) {  // ".ffffff" or ""
      out = 0;
      if (s.empty()) return true;
      if (s.front() != '.' || s.size() < 2 || s.size() > 10) return false;
      std::int64_t scale = 1'000'000;
      for (const char ch : s.substr(1)) {
        if (ch < '0' || ch > '9') return false;
        scale /= 10;
        out += (ch - '0') * scale;  // digits past the microsecond add 0
      }
      return true;
    };
    std::string_view s = text;
    std::int64_t a = 0, b = 0, sec = 0, frac = 0;
    if (!number(s, a)) return 0;
    if (!s.empty() && s.front() == ':') {
      s.remove_prefix(1);
      if (!number(s, b) || s.empty() || s.front() != ':') return 0;
      s.remove_prefix(1);
      if (!number(s, sec) || !micros(s, frac) || a > 23 || b > 59 || sec > 60) return 0;
      std::int64_t t = ((a * 60 + b) * 60 + sec) * 1'000'000 + frac;
      if (t + day_offset_ < last_time_ - kDayUs / 2) day_offset_ += kDayUs;
      t += day_offset_;
      last_time_ = t;
      return t;
    }
    if (!micros(s, frac) || a > std::numeric_limits<std::int64_t>::max() / 1'000'000 - 1) return 0;
    return a * 1'000'000 + frac;
  }

  std::string source_;
  std::vector<std::string_view> fields_;
  std::deque<std::string> quoted_;  // the current line's quoted fields, unescaped (stable
                                    // addresses: fields_ views them)
  std::array<std::size_t, kColumns> column_{};
  std::size_t width_ = 0;
  std::int64_t day_offset_ = 0;
  std::int64_t last_time_ = 0;
};

}  // namespace

TorchSnapshot read_rmm_log(std::string_view csv, std::string_view source) {
  LogReader reader(source);
  TorchSnapshot out;
  std::vector<TraceEvent>& trace = out.device_traces.emplace_back();
  bool have_header = false;
  std::size_t number = 0;
  std::size_t pos = 0;
  // A UTF-8 byte order mark is not part of the header.
  if (csv.substr(0, 3) == "\xEF\xBB\xBF") pos = 3;
  while (pos < csv.size()) {
    const std::size_t end = std::min(csv.find('\n', pos), csv.size());
    std::string_view line = csv.substr(pos, end - pos);
    pos = end + 1;
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (trim_blanks(line).empty()) continue;
    reader.split(line, number);
    if (reader.read_header()) {  // the first header, or a repeated one
      reader.set_width();        // each header governs the rows after it
      have_header = true;
      continue;
    }
    if (!have_header) {
      reader.fail(number, "expected the header " + std::string(kHeader) +
                              " of an RMM log (rmm::mr::logging_resource_adaptor), found " +
                              shown(line));
    }
    trace.push_back(reader.read_row(number));
  }
  if (!have_header) {
    throw TraceFormatError(std::string(source) + ": empty; an RMM log starts with the header " +
                           kHeader);
  }
  return out;
}

}  // namespace memscope
