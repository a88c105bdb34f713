#include "memscope/units.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <cmath>
#include <limits>

#include "common/text.hpp"
#include "memscope/errors.hpp"

namespace memscope {
namespace {

struct Unit {
  std::string_view name;
  double factor;
};

// Binary units first: "MiB" must not be read as "M" + garbage. Matching is case-insensitive.
constexpr std::array<Unit, 10> kUnits{{{"b", 1.0},
                                       {"kib", 1024.0},
                                       {"mib", 1024.0 * 1024},
                                       {"gib", 1024.0 * 1024 * 1024},
                                       {"tib", 1024.0 * 1024 * 1024 * 1024},
                                       {"kb", 1e3},
                                       {"mb", 1e6},
                                       {"gb", 1e9},
                                       {"tb", 1e12},
                                       {"", 1.0}}};

[[noreturn]] void bad_size(std::string_view what, std::string_view text, std::string_view why) {
  throw ConfigError(fmt::format("{}: '{}' is not a size: {} (write e.g. 512, 64KiB, 1.5GiB, 2GB)",
                                what, text, why),
                    std::string(what), std::string(text));
}

}  // namespace

std::size_t parse_size(std::string_view text, std::string_view what) {
  const std::string_view s = detail::trim(text);
  std::size_t i = 0;
  std::uint64_t whole = 0;
  std::size_t digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
    const auto d = static_cast<std::uint64_t>(s[i] - '0');
    if (whole > (std::numeric_limits<std::uint64_t>::max() - d) / 10) {
      bad_size(what, text, "too large");
    }
    whole = whole * 10 + d;
    ++i;
    ++digits;
  }
  double fraction = 0.0;
  double scale = 0.1;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
      fraction += scale * (s[i] - '0');
      scale /= 10;
      ++i;
      ++digits;
    }
  }
  if (digits == 0) bad_size(what, text, "it does not start with a number");
  const std::string_view unit = detail::trim(s.substr(i));
  for (const Unit& u : kUnits) {
    if (!detail::iequals_lower(unit, u.name)) continue;
    if (fraction == 0.0) {
      const auto factor = static_cast<std::uint64_t>(u.factor);
      if (whole != 0 && factor > std::numeric_limits<std::uint64_t>::max() / whole) {
        bad_size(what, text, "too large for 64 bits");
      }
      return static_cast<std::size_t>(whole * factor);
    }
    const double bytes = (static_cast<double>(whole) + fraction) * u.factor;
    if (bytes >= 18446744073709551615.0) bad_size(what, text, "too large for 64 bits");
    if (u.factor == 1.0) bad_size(what, text, "a byte count must be a whole number");
    return static_cast<std::size_t>(std::llround(bytes));
  }
  bad_size(what, text,
           fmt::format("unknown unit '{}' (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)", unit));
}

std::string format_bytes(std::int64_t bytes) {
  const double magnitude = std::fabs(static_cast<double>(bytes));
  if (magnitude < 1024.0) return fmt::format("{} B", bytes);
  static constexpr std::array<std::string_view, 5> kNames{"KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes) / 1024.0;
  std::size_t unit = 0;
  while (std::fabs(value) >= 1024.0 && unit + 1 < kNames.size()) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.2f} {}", value, kNames[unit]);
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
