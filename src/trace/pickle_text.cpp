#include "trace/pickle_text.hpp"

#include <charconv>
#include <limits>
#include <string>
#include <system_error>
#include <vector>

#include "trace/pickle_input.hpp"

namespace memscope::detail {
namespace {

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

int hex_digit(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string quoted(std::string_view text) {
  constexpr std::size_t kShown = 40;  // enough to recognise, short enough for one line
  std::string out = "'";
  for (const char c : text.substr(0, kShown)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u >= 0x20 && u < 0x7F) ? std::string(1, c) : "\\x" + std::to_string(u);
  }
  return out + (text.size() > kShown ? "...'" : "'");
}

}  // namespace

std::int64_t parse_decimal(std::string_view text) {
  std::string_view digits = text;
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size()) {
    throw PickleProblem(ec == std::errc::result_out_of_range
                            ? "integer " + quoted(text) + " does not fit in 64 bits"
                            : "argument " + quoted(text) + " is not a decimal integer");
  }
  return value;
}

std::uint64_t parse_index(std::string_view text) {
  const std::int64_t value = parse_decimal(text);
  if (value < 0) throw PickleProblem("memo index " + quoted(text) + " is negative");
  return static_cast<std::uint64_t>(value);
}

double parse_float(std::string_view text) {
  std::string_view digits = text;
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  double value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  // Out of range means an overflow to infinity or an underflow to zero: Python accepts both.
  if (digits.empty() || (ec != std::errc{} && ec != std::errc::result_out_of_range) ||
      end != digits.data() + digits.size()) {
    throw PickleProblem("argument " + quoted(text) + " is not a float");
  }
  if (ec == std::errc::result_out_of_range) {
    // from_chars leaves value unchanged here; recover the direction from the text.
    const bool tiny =
        digits.find("e-") != std::string_view::npos || digits.find("E-") != std::string_view::npos;
    const bool negative = !digits.empty() && digits.front() == '-';
    value = tiny ? 0.0 : std::numeric_limits<double>::infinity();
    if (negative) value = -value;
  }
  return value;
}

bool decode_long(std::string_view bytes, std::int64_t& out) {
  out = 0;
  if (bytes.empty()) return true;
  const std::size_t n = bytes.size();
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(bytes[i]); };
  const bool negative = (byte(n - 1) & 0x80) != 0;
  // Bytes beyond the eighth may only repeat the sign; then the low eight hold the value.
  const std::size_t used = n < 8 ? n : 8;
  for (std::size_t i = used; i < n; ++i) {
    if (byte(i) != (negative ? 0xFF : 0x00)) return false;
  }
  if (n > 8 && ((byte(7) & 0x80) != 0) != negative) return false;
  std::uint64_t value = negative ? ~std::uint64_t{0} : 0;
  for (std::size_t i = used; i-- > 0;) {
    value = (value << 8) | byte(i);
  }
  out = static_cast<std::int64_t>(value);
  return true;
}

namespace {

// Python prints no int of more digits unless told to (sys.set_int_max_str_digits).
constexpr std::size_t kMaxDecimalDigits = 4300;

}  // namespace

std::string long_decimal(std::string_view bytes) {
  // Each byte adds at most log10(256) < 2.41 digits.
  if (bytes.size() * 241 / 100 > kMaxDecimalDigits + 3) {
    throw PickleProblem("integer of " + std::to_string(bytes.size()) + " bytes has more than " +
                        std::to_string(kMaxDecimalDigits) +
                        " decimal digits (Python's own limit for printing an int)");
  }
  // The magnitude, most significant byte first (two's complement negated when negative).
  const bool negative = !bytes.empty() && (static_cast<std::uint8_t>(bytes.back()) & 0x80) != 0;
  std::vector<std::uint32_t> magnitude(bytes.size());
  unsigned carry = negative ? 1 : 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {  // least significant first
    unsigned b = static_cast<std::uint8_t>(bytes[i]);
    if (negative) {
      b = (~b & 0xFFU) + carry;
      carry = b >> 8;
      b &= 0xFFU;
    }
    magnitude[bytes.size() - 1 - i] = b;
  }
  // Long division by 10^9, base 256, collecting nine digits at a time.
  std::vector<std::uint32_t> chunks;
  std::size_t start = 0;
  while (start < magnitude.size()) {
    std::uint64_t remainder = 0;
    for (std::size_t i = start; i < magnitude.size(); ++i) {
      const std::uint64_t cur = (remainder << 8) | magnitude[i];
      magnitude[i] = static_cast<std::uint32_t>(cur / 1'000'000'000U);
      remainder = cur % 1'000'000'000U;
    }
    chunks.push_back(static_cast<std::uint32_t>(remainder));
    while (start < magnitude.size() && magnitude[start] == 0) ++start;
  }
  if (chunks.empty()) return "0";
  std::string out;
  if (negative) out.push_back('-');
  out += std::to_string(chunks.back());
  for (std::size_t i = chunks.size() - 1; i-- > 0;) {
    const std::string part = std::to_string(chunks[i]);
    out.append(9 - part.size(), '0');
    out += part;
  }
  return out;
}

std::string normalize_decimal(std::string_view text) {
  const bool negative = !text.empty() && text.front() == '-';
  if (!text.empty() && (text.front() == '-' || text.front() == '+')) text.remove_prefix(1);
  if (text.empty() || text.find_first_not_of("0123456789") != std::string_view::npos) {
    throw PickleProblem("not a decimal integer: '" + std::string(text) + "'");
  }
  while (text.size() > 1 && text.front() == '0') text.remove_prefix(1);
  if (text.size() > kMaxDecimalDigits) {
    throw PickleProblem("integer of " + std::to_string(text.size()) + " digits has more than " +
                        std::to_string(kMaxDecimalDigits) +
                        " decimal digits (Python's own limit for printing an int)");
  }
  std::string out;
  out.reserve(text.size() + 1);
  if (negative && text != "0") out.push_back('-');
  out.append(text);
  return out;
}

std::string decode_string_literal(std::string_view text) {
  while (!text.empty() && static_cast<unsigned char>(text.back()) <= ' ') text.remove_suffix(1);
  if (text.size() < 2 || text.front() != text.back() ||
      (text.front() != '\'' && text.front() != '"')) {
    throw PickleProblem("the STRING argument " + quoted(text) + " must be quoted");
  }
  const std::string_view s = text.substr(1, text.size() - 2);
  std::string bytes;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      bytes.push_back(s[i]);
      continue;
    }
    if (++i == s.size()) throw PickleProblem("trailing \\ in the STRING argument");
    const char c = s[i];
    switch (c) {
      case '\n':
        break;
      case '\\':
      case '\'':
      case '"':
        bytes.push_back(c);
        break;
      case 'a':
        bytes.push_back('\a');
        break;
      case 'b':
        bytes.push_back('\b');
        break;
      case 'f':
        bytes.push_back('\f');
        break;
      case 'n':
        bytes.push_back('\n');
        break;
      case 'r':
        bytes.push_back('\r');
        break;
      case 't':
        bytes.push_back('\t');
        break;
      case 'v':
        bytes.push_back('\v');
        break;
      case 'x': {
        const int hi = i + 1 < s.size() ? hex_digit(s[i + 1]) : -1;
        const int lo = i + 2 < s.size() ? hex_digit(s[i + 2]) : -1;
        if (hi < 0 || lo < 0) throw PickleProblem("invalid \\x escape in the STRING argument");
        bytes.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          unsigned value = static_cast<unsigned>(c - '0');
          for (int k = 0; k < 2 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7'; ++k) {
            value = value * 8 + static_cast<unsigned>(s[++i] - '0');
          }
          bytes.push_back(static_cast<char>(value & 0xFF));
        } else {  // unknown escapes stay as written, as Python keeps them
          bytes.push_back('\\');
          bytes.push_back(c);
        }
    }
  }
  return latin1_to_utf8(bytes);
}

std::string decode_raw_unicode_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    if (s[i] != '\\') {
      append_utf8(out, static_cast<std::uint8_t>(s[i++]));
      continue;
    }
    // \u escapes count only after an odd run of backslashes (raw-unicode-escape's rule).
    std::size_t run = 0;
    while (i < s.size() && s[i] == '\\') {
      out.push_back('\\');
      ++run;
      ++i;
    }
    if (run % 2 == 0 || i == s.size() || (s[i] != 'u' && s[i] != 'U')) continue;
    out.pop_back();
    const std::size_t count = s[i] == 'u' ? 4 : 8;
    ++i;
    std::uint32_t cp = 0;
    for (std::size_t k = 0; k < count; ++k, ++i) {
      const int d = i < s.size() ? hex_digit(s[i]) : -1;
      if (d < 0) throw PickleProblem("truncated \\uXXXX escape in the UNICODE argument");
      cp = cp * 16 + static_cast<std::uint32_t>(d);
      if (cp > 0x10FFFF) throw PickleProblem("\\U escape beyond U+10FFFF in the UNICODE argument");
    }
    append_utf8(out, cp);
  }
  return out;
}

std::string latin1_to_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (const char c : bytes) append_utf8(out, static_cast<std::uint8_t>(c));
  return out;
}

void check_utf8(std::string_view text) {
  const auto fail = [](std::size_t at) {
    throw PickleProblem("str payload is not valid UTF-8 (byte " + std::to_string(at) +
                        " of the string)");
  };
  std::size_t i = 0;
  while (i < text.size()) {
    const auto b0 = static_cast<std::uint8_t>(text[i]);
    if (b0 < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if ((b0 & 0xE0) == 0xC0) {
      len = 2;
      cp = b0 & 0x1Fu;
    } else if ((b0 & 0xF0) == 0xE0) {
      len = 3;
      cp = b0 & 0x0Fu;
    } else if ((b0 & 0xF8) == 0xF0) {
      len = 4;
      cp = b0 & 0x07u;
    } else {
      fail(i);
    }
    if (i + len > text.size()) fail(i);
    for (std::size_t k = 1; k < len; ++k) {
      const auto b = static_cast<std::uint8_t>(text[i + k]);
      if ((b & 0xC0) != 0x80) fail(i + k);
      cp = (cp << 6) | (b & 0x3Fu);
    }
    const std::uint32_t min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10FFFF) fail(i);  // overlong or beyond Unicode
    i += len;
  }
}

}  // namespace memscope::detail
