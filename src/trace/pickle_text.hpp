// Decoders for pickle arguments that are not plain fixed-size integers: the decimal and quoted
// text of protocol 0, the variable-length two's complement integers of LONG1/LONG4, and UTF-8
// validation of str payloads. Each throws PickleProblem on input Python would also reject.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace memscope::detail {

// "-42", "+7", "0012": a decimal integer that fits in int64 (INT, LONG without its 'L', GET...).
[[nodiscard]] std::int64_t parse_decimal(std::string_view text);
// A non-negative decimal (memo indices of GET and PUT).
[[nodiscard]] std::uint64_t parse_index(std::string_view text);
// Python's repr of a float: "2.5", "-1e+300", "inf", "nan".
[[nodiscard]] double parse_float(std::string_view text);
// LONG1/LONG4 payload: little-endian two's complement; empty means 0. False when the value does
// not fit in int64 (then long_decimal() gives it).
[[nodiscard]] bool decode_long(std::string_view bytes, std::int64_t& out);
// Any LONG1/LONG4 payload as Python's repr writes it. Throws beyond 4300 decimal digits
// (Python's own sys.int_info.default_max_str_digits).
[[nodiscard]] std::string long_decimal(std::string_view bytes);
// LONG's protocol-0 text ("123", "-7", "+0012"), out of int64 range: Python's repr of it.
[[nodiscard]] std::string normalize_decimal(std::string_view text);
// STRING's argument: a quoted Python 2 byte-string literal with backslash escapes, returned as
// UTF-8 text of its bytes read as Latin-1.
[[nodiscard]] std::string decode_string_literal(std::string_view quoted);
// UNICODE's argument: raw-unicode-escape (Latin-1 bytes and \uXXXX / \UXXXXXXXX escapes).
[[nodiscard]] std::string decode_raw_unicode_escape(std::string_view text);
// Latin-1 bytes as UTF-8 (BINSTRING, SHORT_BINSTRING).
[[nodiscard]] std::string latin1_to_utf8(std::string_view bytes);
// Throws unless `text` is UTF-8 as Python writes it (surrogates allowed: 'surrogatepass').
void check_utf8(std::string_view text);

}  // namespace memscope::detail
