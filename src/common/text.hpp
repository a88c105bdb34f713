// Small text helpers shared by the parsers (configuration strings, sizes, device lists) and
// the reports. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace memscope::detail {

// `text` without the whitespace (std::isspace, C locale) at either end.
[[nodiscard]] std::string_view trim(std::string_view text) noexcept;

// True when `text` equals `lower_case` ignoring the case of ASCII letters in `text`;
// `lower_case` must be written in lower case.
[[nodiscard]] bool iequals_lower(std::string_view text, std::string_view lower_case) noexcept;

// "1,234,567": a count with its thousands grouped, for reports.
[[nodiscard]] std::string group_digits(std::uint64_t n);

}  // namespace memscope::detail
