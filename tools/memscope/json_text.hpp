// JSON text of what the memscope command writes (--json files, the HTML page's data): as
// nlohmann::json::dump(), except that strings which are not valid UTF-8 (a command line, a
// frame's file name, a pickle's lone surrogate) are written, not refused: each byte that does
// not begin a valid sequence becomes \udc80-\udcff, Python's "surrogateescape" (json.loads then
// os.fsencode() gives the bytes back). '<' is written \u003c, so the text is safe in <script>.
//
// Thread safety: pure. Errors: none (std::bad_alloc aside).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace memscope::cli {

// `indent` < 0: compact; else a newline and `indent` spaces per level, as dump(indent).
[[nodiscard]] std::string json_text(const nlohmann::json& json, int indent = -1);

}  // namespace memscope::cli
