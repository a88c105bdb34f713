// The JSON form ("format": "memscope-run", "version": 1) of what `memscope run` saw, the
// RunRecord of include/memscope/watched_run.hpp, that `run --json` writes and `report` / `diff`
// read back. Times are seconds since the command started; memory in bytes; -1 where a number is
// unknown.
//
// Errors: run_record_from_json() throws ReportFormatError (memscope/json_reader.hpp) naming
// `source` and the field that is missing or of the wrong type; another format or a newer
// version is refused by the envelope's reader (memscope/json_envelope.hpp).
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "memscope/watched_run.hpp"

namespace memscope::cli {

[[nodiscard]] nlohmann::json run_record_to_json(const RunRecord& record);
[[nodiscard]] RunRecord run_record_from_json(const nlohmann::json& json, const std::string& source);
// The stage a moment belongs to: the innermost (latest begun) stage open at `t`; nullptr if
// none. A stage that never ended lasts to the end of the run.
[[nodiscard]] const RunStage* stage_at(const RunRecord& record, double t);

}  // namespace memscope::cli
