// What an input file of `memscope report` and `memscope diff` is, told by its content, never by
// its name: a trace (PyTorch snapshot pickle or JSON, memscope trace JSON, RMM log), saved
// metrics (save_metrics JSON: one flat object of numbers and strings), a run recording
// (`memscope run --json`, "format": "memscope-run"), a replay result (`memscope replay --json`,
// "format": "memscope-replay") or an estimate (`memscope estimate --json`, "memscope-estimate").
//
// Thread safety: pure apart from reading the file. Errors: read_input() throws InputFailure
// naming the file when it is missing, unreadable or JSON that does not parse; a file of no
// known kind is returned as InputKind::unknown (with what it looked like), so the caller can
// say which kinds it takes.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "memscope/metrics.hpp"

namespace memscope::cli {

enum class InputKind { unknown, trace, metrics, run, replay, estimate };

// "trace", "metrics", "run recording", "replay result", "memscope estimate", "unknown".
[[nodiscard]] const char* to_string(InputKind kind) noexcept;

struct InputFile {
  std::filesystem::path path;
  InputKind kind = InputKind::unknown;
  nlohmann::json json;     // the parsed JSON of run and replay files; null for the others
  Metrics metrics;         // saved metrics, parsed from the bytes read (the path may be a pipe)
  std::string bytes;       // a trace's content (read once: the path may be a pipe)
  std::string looks_like;  // for unknown: what was found ("a JSON array of numbers", "empty")
};

// Reads `path` and tells its kind; `role` names the argument in messages ("FILE", "A").
[[nodiscard]] InputFile read_input(const std::filesystem::path& path, std::string_view role);

// The kinds report and diff understand, for messages: "saved metrics (...), a run ...".
[[nodiscard]] std::string understood_kinds();

// The whole file as bytes, read once (read_whole_file(): pipes, FIFOs, /proc files, capped);
// InputFailure naming `role`, the file and what it is when it cannot be read.
[[nodiscard]] std::string read_file_bytes(const std::filesystem::path& path, std::string_view role);

// A file named on the command line: its role in messages ("--json", "TRACE") and its path.
struct NamedPath {
  std::string_view role;
  std::filesystem::path path;
};

// Checked before any work, so that a typo does not cost a whole run: each output's folder
// exists and is writable, the output is not a folder and, if it exists, is writable; no output
// is one of the inputs or another output (a regular file; /dev/null twice is fine).
// OutputFailure naming the output when it cannot be written, UsageFailure naming both paths
// when it is an input or another output. Empty paths (options not given) are skipped.
void check_outputs(const std::vector<NamedPath>& inputs, const std::vector<NamedPath>& outputs);

// Writes an output file atomically (a temporary file renamed over it, so nothing is written
// half); OutputFailure naming `option` and the file when it cannot be written.
void write_output_file(const std::filesystem::path& path, std::string_view content,
                       std::string_view option);

// --json FILE: `json` as memscope writes JSON (report::json_text, indented), through
// write_output_file().
void write_json_output(const std::filesystem::path& path, const nlohmann::json& json);

}  // namespace memscope::cli
