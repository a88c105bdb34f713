// Byte sizes as people write them ("24GiB", "1.5 GB", "512") and as memscope prints them.
//
// parse_size accepts an integer or decimal number followed by an optional unit: B, KiB, MiB,
// GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000); units are case-insensitive and
// may be separated by spaces. A bare number is bytes. It throws ConfigError naming `what` and
// the text when the text is not a size or does not fit in 64 bits. The result is exact: a
// fraction is rounded to the nearest byte (halves up), with no floating point on the way, so
// "10000000000.5GB" is 10000000000500000000 and "16777215.99TiB" is 18446744062714435338.
// All functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace memscope {

inline constexpr std::size_t KiB = 1024;
inline constexpr std::size_t MiB = 1024 * KiB;
inline constexpr std::size_t GiB = 1024 * MiB;

[[nodiscard]] std::size_t parse_size(std::string_view text, std::string_view what = "size");
// parse_size() for sizes people type, where a bare number is more likely a forgotten unit than
// a byte count ("--capacity 24" meaning 24 GiB): the unit is required ("24GiB"; "512B" for
// bytes). ConfigError naming `what` and the text otherwise.
[[nodiscard]] std::size_t parse_size_with_unit(std::string_view text,
                                               std::string_view what = "size");

// A count with its thousands grouped: "3,442".
[[nodiscard]] std::string format_count(std::uint64_t n);

// "1.50 GiB", "512 B", "-3.00 MiB": binary units (up to EiB), two decimals above bytes.
[[nodiscard]] std::string format_bytes(std::int64_t bytes);
// The same for an unsigned size: sizes of 2^63 bytes and more print as what they are ("16.00
// EiB"), never as negative numbers.
[[nodiscard]] std::string format_size(std::size_t bytes);

// The exact size in the largest binary unit that divides it: "24GiB", "1536MiB", "1000B".
// parse_size() reads it back to the same number.
[[nodiscard]] std::string format_size_exact(std::size_t bytes);

}  // namespace memscope
