// UTF-8 validation for text memscope writes into files other programs read: Python's pickle and
// JSON readers refuse a str that is not valid UTF-8, and names from outside (symbol names,
// tags) may not be.
#pragma once

#include <string>
#include <string_view>

namespace memscope::detail {

// Whether `text` is valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
[[nodiscard]] bool is_valid_utf8(std::string_view text) noexcept;
// `text` with each byte that does not begin a valid sequence replaced by U+FFFD (one per byte,
// also for a sequence cut short, where Python would write one for the whole prefix).
[[nodiscard]] std::string valid_utf8(std::string_view text);
// `text` itself when it is valid UTF-8 (no copy), else valid_utf8(text) kept in `storage`.
[[nodiscard]] inline std::string_view as_valid_utf8(std::string_view text, std::string& storage) {
  if (is_valid_utf8(text)) return text;
  storage = valid_utf8(text);
  return storage;
}

// Appends `text` as a JSON string literal (quotes included). Bytes that are not valid UTF-8 are
// written as the escapes \udc80 to \udcff, Python's "surrogateescape" convention (json.loads
// then os.fsencode() gives the bytes back), never replaced or refused; control characters, '"'
// and '\\' are escaped, and '<' too (\u003c) so that the text is safe inside an HTML <script>.
void append_json_string(std::string& out, std::string_view text);

}  // namespace memscope::detail
