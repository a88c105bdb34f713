// A Report (report.hpp) as JSON and back, and the JSON text of what memscope writes (--json
// files, the HTML page's data): as nlohmann::json::dump(), except that strings which are not valid
// UTF-8 (a command line, a frame's file name, a pickle's lone surrogate) are written, not refused:
// each byte that does not begin a valid sequence becomes \udc80-\udcff, Python's "surrogateescape"
// (json.loads then os.fsencode() gives the bytes back). '<' is written \u003c, so the text is safe
// in <script>.
//
// parse_json_text() reads such text back with the bytes restored: nlohmann's parser refuses a
// lone surrogate escape, so each lone \udc80-\udcff is first rewritten as U+10FF80-U+10FFFF
// (the last private-use code points of plane 16) and, after parsing, turned back into its byte.
// A genuine U+10FF80-U+10FFFF in a string would come back as that byte too: a price paid for
// code points no text uses.
//
// report_to_json() / report_from_json(): {"format": "memscope-report", "version": 1} and every
// field of report.hpp under its own name; doubles are written with enough digits to read back
// the same number, a non-finite one as null (read back as NaN). The `replay --json` file embeds
// this object, so a saved replay renders later without its trace.
//
// The one header of memscope that names nlohmann::json (forward-declared here): a program that
// includes it needs nlohmann_json 3.10 or later on its include path; the library is built with
// it and links nothing of it.
//
// Thread safety: pure. Errors: report_from_json() throws ReportFormatError naming `source` and
// the field's path (json_reader.hpp); json_text() none (std::bad_alloc aside); parse_json_text
// throws what nlohmann::json::parse() throws (parse_error, and out_of_range for a number too big
// for a double, such as 1e999: catch nlohmann::json::exception), or returns a discarded value when
// `allow_exceptions` is false.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "memscope/json_reader.hpp"
#include "memscope/report.hpp"

namespace memscope::report {

// `indent` < 0: compact; else a newline and `indent` spaces per level, as dump(indent).
[[nodiscard]] std::string json_text(const nlohmann::json& json, int indent = -1);

[[nodiscard]] nlohmann::json parse_json_text(std::string_view text, bool allow_exceptions = true);

[[nodiscard]] nlohmann::json report_to_json(const Report& report);
// The segment map's part of it (the HTML page carries the same object).
[[nodiscard]] nlohmann::json segment_map_to_json(const SegmentMap& map);
[[nodiscard]] Report report_from_json(const nlohmann::json& json, const std::string& source);
// The report at `object`, a part of a larger file (a replay result's "report"): errors name the
// file and kind of `object`'s source and the field's full path ("report.tables[0].title").
[[nodiscard]] Report report_from_json(const JsonObject& object);

}  // namespace memscope::report
