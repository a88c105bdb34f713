// Small text helpers shared by the parsers (configuration strings, sizes, device lists).
// Pure functions on views: no allocation, thread-safe.
#pragma once

#include <string_view>

namespace memscope::detail {

// `text` without the whitespace (std::isspace, C locale) at either end.
[[nodiscard]] std::string_view trim(std::string_view text) noexcept;

// True when `text` equals `lower_case` ignoring the case of ASCII letters in `text`;
// `lower_case` must be written in lower case.
[[nodiscard]] bool iequals_lower(std::string_view text, std::string_view lower_case) noexcept;

}  // namespace memscope::detail
