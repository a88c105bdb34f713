#include "memscope/units.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <limits>

#include "common/text.hpp"
#include "memscope/errors.hpp"

namespace memscope {
namespace {

struct Unit {
  std::string_view name;
  std::uint64_t factor;
};

// Binary units first: "MiB" must not be read as "M" + garbage. Matching is case-insensitive.
constexpr std::array<Unit, 10> kUnits{{{"b", 1},
                                       {"kib", std::uint64_t{1} << 10},
                                       {"mib", std::uint64_t{1} << 20},
                                       {"gib", std::uint64_t{1} << 30},
                                       {"tib", std::uint64_t{1} << 40},
                                       {"kb", 1'000},
                                       {"mb", 1'000'000},
                                       {"gb", 1'000'000'000},
                                       {"tb", 1'000'000'000'000},
                                       {"", 1}}};

[[noreturn]] void bad_size(std::string_view what, std::string_view text, std::string_view why) {
  throw ConfigError(fmt::format("{}: '{}' is not a size: {} (write e.g. 512, 64KiB, 1.5GiB, 2GB)",
                                what, text, why),
                    std::string(what), std::string(text));
}

// round(0.d1d2...dn * factor), half up, exactly: Horner's rule from the last digit with floor
// division is exact for floors (floor((a + floor(y)) / 10) = floor((a + y) / 10) for integer a),
// so it yields floor(2 * value), and (that + 1) / 2 is the rounded value. Every intermediate
// stays below 20 * factor <= 2.2e13.
std::uint64_t round_fraction(std::string_view digits, std::uint64_t factor) noexcept {
  std::uint64_t twice = 0;  // floor(2 * 0.d(i)...dn * factor), from i = n down to 1
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    twice = (static_cast<std::uint64_t>(*it - '0') * 2 * factor + twice) / 10;
  }
  return (twice + 1) / 2;
}

}  // namespace

std::size_t parse_size(std::string_view text, std::string_view what) {
  static_assert(sizeof(std::size_t) == sizeof(std::uint64_t));
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  const std::string_view s = detail::trim(text);
  std::size_t i = 0;
  std::uint64_t whole = 0;
  std::size_t digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
    const auto d = static_cast<std::uint64_t>(s[i] - '0');
    if (whole > (kMax - d) / 10) bad_size(what, text, "too large for 64 bits");
    whole = whole * 10 + d;
    ++i;
    ++digits;
  }
  std::string_view fraction;  // the digits after the point, trailing zeros dropped
  if (i < s.size() && s[i] == '.') {
    const std::size_t first = ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    fraction = s.substr(first, i - first);
    digits += fraction.size();
    while (!fraction.empty() && fraction.back() == '0') fraction.remove_suffix(1);
  }
  if (digits == 0) bad_size(what, text, "it does not start with a number");
  const std::string_view unit = detail::trim(s.substr(i));
  for (const Unit& u : kUnits) {
    if (!detail::iequals_lower(unit, u.name)) continue;
    if (!fraction.empty() && u.factor == 1) {
      bad_size(what, text, "a byte count must be a whole number");
    }
    if (whole != 0 && u.factor > kMax / whole) bad_size(what, text, "too large for 64 bits");
    const std::uint64_t bytes = whole * u.factor;
    const std::uint64_t rest = fraction.empty() ? 0 : round_fraction(fraction, u.factor);
    if (rest > kMax - bytes) bad_size(what, text, "too large for 64 bits");
    return static_cast<std::size_t>(bytes + rest);
  }
  bad_size(what, text,
           fmt::format("unknown unit '{}' (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)", unit));
}

namespace {

// "1.50 GiB" for `magnitude` bytes, with a minus sign when `negative`.
std::string format_magnitude(bool negative, std::uint64_t magnitude) {
  const std::string_view sign = negative ? "-" : "";
  if (magnitude < 1024) return fmt::format("{}{} B", sign, magnitude);
  static constexpr std::array<std::string_view, 6> kNames{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(magnitude) / 1024.0;
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < kNames.size()) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{}{:.2f} {}", sign, value, kNames[unit]);
}

}  // namespace

std::string format_bytes(std::int64_t bytes) {
  // The magnitude of INT64_MIN does not fit in int64_t; in uint64_t it does.
  const std::uint64_t magnitude = bytes < 0 ? std::uint64_t{0} - static_cast<std::uint64_t>(bytes)
                                            : static_cast<std::uint64_t>(bytes);
  return format_magnitude(bytes < 0, magnitude);
}

std::string format_size(std::size_t bytes) {
  return format_magnitude(false, bytes);
}

std::size_t parse_size_with_unit(std::string_view text, std::string_view what) {
  const std::string_view s = detail::trim(text);
  if (!s.empty() && (std::isdigit(static_cast<unsigned char>(s.back())) != 0 || s.back() == '.')) {
    throw ConfigError(
        fmt::format("{}: '{}' has no unit; a bare number is ambiguous ({} bytes or {} GiB?): "
                    "write the unit, e.g. {}GiB, {}MB, or {}B for bytes",
                    what, text, s, s, s, s, s),
        std::string(what), std::string(text));
  }
  return parse_size(text, what);
}

std::string format_count(std::uint64_t n) {
  return detail::group_digits(n);
}

std::string format_size_exact(std::size_t bytes) {
  static constexpr std::array<std::string_view, 4> kNames{"TiB", "GiB", "MiB", "KiB"};
  for (std::size_t i = 0; i < kNames.size(); ++i) {
    const std::size_t unit = std::size_t{1} << (10 * (4 - i));
    if (bytes != 0 && bytes % unit == 0) return fmt::format("{}{}", bytes / unit, kNames[i]);
  }
  return fmt::format("{}B", bytes);
}

}  // namespace memscope
