// The one envelope of every JSON object memscope writes: {"format": "memscope-<kind>",
// "version": N, ...the kind's fields}. The kinds: "run" (memscope run --json), "replay"
// (memscope replay --json), "diff" (memscope diff --json), "info" (memscope info --json) and
// "report" (a Report, report_json.hpp). A reader accepts versions 1 to the newest it knows; a
// newer file is refused with a message saying to upgrade memscope, not with a missing field.
//
// Like report_json.hpp, this header names nlohmann::json (forward-declared): a program that
// includes it needs nlohmann_json 3.10 or later on its include path.
//
// Thread safety: pure. Errors: read_envelope() throws ReportFormatError naming the file (and
// the object's path in it), the format found and the fix; the others throw nothing but
// std::bad_alloc.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "memscope/json_reader.hpp"

namespace memscope::report {

// "memscope-run" for "run".
[[nodiscard]] std::string format_of_kind(std::string_view kind);

// {"format": "memscope-<kind>", "version": version}: the start of the object to write.
[[nodiscard]] nlohmann::json envelope(std::string_view kind, int version);

// The kind of a memscope object ("run" for {"format": "memscope-run"}); none when `json` is not
// an object or its "format" is not a string starting "memscope-".
[[nodiscard]] std::optional<std::string> envelope_kind(const nlohmann::json& json);

// Checks that `object` is memscope-<kind> of a version from 1 to `max_version` and returns
// that version.
int read_envelope(const JsonObject& object, std::string_view kind, int max_version);

}  // namespace memscope::report
