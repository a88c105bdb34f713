// Telling input files apart by content (input_files.hpp).
#include "input_files.hpp"

#include <cerrno>
#include <fstream>
#include <sstream>
#include <system_error>

#include "cli.hpp"
#include "common/atomic_file.hpp"
#include "memscope/errors.hpp"
#include "memscope/trace.hpp"
#include "run_record.hpp"

namespace memscope::cli {
namespace {

namespace fs = std::filesystem;

std::string quoted(const fs::path& path) {
  return "'" + path.string() + "'";
}

// save_metrics writes one flat object whose values are numbers, strings or booleans.
bool is_flat_metrics(const nlohmann::json& json) {
  if (!json.is_object() || json.empty()) return false;
  for (const auto& [key, value] : json.items()) {
    if (!(value.is_number() || value.is_string() || value.is_boolean())) return false;
  }
  return true;
}

// PyTorch's snapshot JSON and memscope's trace JSON: an object with the snapshot's keys, or the
// older bare list of segments.
bool is_trace_json(const nlohmann::json& json) {
  if (json.is_array()) return json.empty() || json.front().is_object();
  return json.is_object() && (json.contains("segments") || json.contains("device_traces"));
}

std::string describe(const nlohmann::json& json) {
  if (json.is_object()) {
    if (json.contains("format") && json["format"].is_string()) {
      return "a JSON object of format '" + json["format"].get<std::string>() + "'";
    }
    return json.empty() ? "an empty JSON object" : "a JSON object with nested values";
  }
  if (json.is_array()) return "a JSON array of non-objects";
  return std::string("a JSON ") + json.type_name();
}

}  // namespace

const char* to_string(InputKind kind) noexcept {
  switch (kind) {
    case InputKind::trace:
      return "trace";
    case InputKind::metrics:
      return "metrics";
    case InputKind::run:
      return "run recording";
    case InputKind::replay:
      return "replay result";
    case InputKind::unknown:
      break;
  }
  return "unknown";
}

std::string understood_kinds() {
  return "saved metrics (the flat JSON of save_metrics or the Trainer), a run recording "
         "(memscope run --json), a replay result (memscope replay --json), or a trace (a "
         "PyTorch memory snapshot as pickle or JSON, a memscope trace JSON, an RMM log)";
}

std::string read_file_bytes(const fs::path& path, std::string_view role) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    throw InputFailure(std::string(role) + " " + quoted(path) +
                       ": no such file; give the path of an existing file");
  }
  if (fs::is_directory(path, ec)) {
    throw InputFailure(std::string(role) + " " + quoted(path) + ": is a folder, not a file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw InputFailure(std::string(role) + " " + quoted(path) + ": cannot be opened: " +
                       std::error_code(errno, std::generic_category()).message());
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) {
    throw InputFailure(std::string(role) + " " + quoted(path) + ": read failed");
  }
  return std::move(bytes).str();
}

void write_output_file(const fs::path& path, std::string_view content, std::string_view option) {
  try {
    detail::write_file_atomically(path, content);
  } catch (const Error& e) {
    throw OutputFailure(std::string(option) + " " + quoted(path) + ": cannot be written (" +
                        e.what() + "); give a path in a folder that exists and is writable");
  }
}

InputFile read_input(const fs::path& path, std::string_view role) {
  InputFile file;
  file.path = path;
  const std::string bytes = read_file_bytes(path, role);
  switch (detect_trace_format(bytes)) {
    case TraceFormat::pickle:
    case TraceFormat::rmm_log:
      file.kind = InputKind::trace;
      return file;
    case TraceFormat::unknown:
      file.looks_like = bytes.empty() ? "an empty file" : "neither JSON, a pickle nor an RMM log";
      return file;
    case TraceFormat::json:
      break;
  }
  nlohmann::json json = nlohmann::json::parse(bytes, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    // Parse again to get the position and reason; only the failing path pays for it.
    try {
      json = nlohmann::json::parse(bytes);
    } catch (const nlohmann::json::parse_error& e) {
      throw InputFailure(std::string(role) + " " + quoted(path) + ": not valid JSON (" + e.what() +
                         ")");
    }
  }
  if (is_run_record(json) ||
      (json.is_object() && json.value("format", std::string()) == "memscope-run")) {
    file.kind = InputKind::run;
  } else if (json.is_object() && json.value("format", std::string()) == "memscope-replay") {
    file.kind = InputKind::replay;
  } else if (is_trace_json(json)) {
    file.kind = InputKind::trace;
    return file;  // read_trace_file() reads it again with its own checks
  } else if (is_flat_metrics(json)) {
    file.kind = InputKind::metrics;
  } else {
    file.looks_like = describe(json);
    return file;
  }
  file.json = std::move(json);
  return file;
}

}  // namespace memscope::cli
