// Telling input files apart by content (input_files.hpp).
#include "input_files.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>
#include <optional>
#include <system_error>

#include "cli.hpp"
#include "memscope/atomic_file.hpp"
#include "memscope/errors.hpp"
#include "memscope/json_envelope.hpp"
#include "memscope/metrics.hpp"
#include "memscope/report_json.hpp"
#include "memscope/trace.hpp"

namespace memscope::cli {
namespace {

namespace fs = std::filesystem;

std::string quoted(const fs::path& path) {
  return fmt::format("'{}'", path.string());  // not "'" + ...: GCC 12's false -Wrestrict at -O3
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
    case InputKind::estimate:
      return "memscope estimate";
    case InputKind::unknown:
      break;
  }
  return "unknown";
}

std::string understood_kinds() {
  return "saved metrics (the flat JSON of save_metrics or the Trainer), a run recording "
         "(memscope run --json), a replay result (memscope replay --json), an estimate (memscope "
         "estimate --json), or a trace (a "
         "PyTorch memory snapshot as pickle or JSON, a memscope trace JSON, an RMM log)";
}

std::string read_file_bytes(const fs::path& path, std::string_view role) {
  try {
    return read_whole_file(path);
  } catch (const TraceFormatError& e) {
    throw InputFailure(std::string(role) + " " + quoted(path) + ": " + e.what());
  }
}

namespace {

// Whether two paths name one regular file (or one file not yet there): writing one would
// replace the other.
bool same_regular_file(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) {
    return fs::equivalent(a, b, ec) && fs::is_regular_file(a, ec);
  }
  const fs::path ca = fs::weakly_canonical(a, ec);
  if (ec) return false;
  const fs::path cb = fs::weakly_canonical(b, ec);
  return !ec && ca == cb;
}

void check_output(const NamedPath& out) {
  const fs::path folder = out.path.parent_path().empty() ? fs::path(".") : out.path.parent_path();
  std::error_code ec;
  const std::string where = std::string(out.role) + " " + quoted(out.path);
  if (!fs::is_directory(folder, ec)) {
    throw OutputFailure(where + ": the folder '" + folder.string() +
                        "' does not exist; create it or write elsewhere");
  }
  if (fs::is_directory(out.path, ec))
    throw OutputFailure(where + ": is a folder; give a file name");
  if (fs::exists(out.path, ec)) {
    if (::access(out.path.c_str(), W_OK) != 0) {
      throw OutputFailure(where + ": cannot be written (" +
                          std::error_code(errno, std::generic_category()).message() +
                          "); give a file you may write");
    }
    if (!fs::is_regular_file(out.path, ec)) return;  // /dev/null, a FIFO: written into
  }
  if (::access(folder.c_str(), W_OK | X_OK) != 0) {
    throw OutputFailure(where + ": the folder '" + folder.string() + "' cannot be written (" +
                        std::error_code(errno, std::generic_category()).message() +
                        "); write elsewhere");
  }
}

}  // namespace

void check_outputs(const std::vector<NamedPath>& inputs, const std::vector<NamedPath>& outputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const NamedPath& out = outputs[i];
    if (out.path.empty()) continue;
    check_output(out);
    for (const NamedPath& in : inputs) {
      if (!in.path.empty() && same_regular_file(out.path, in.path)) {
        throw UsageFailure(std::string(out.role) + " " + quoted(out.path) + " is the input " +
                           std::string(in.role) + " " + quoted(in.path) +
                           "; writing it would replace the input: give another file name");
      }
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (!outputs[j].path.empty() && same_regular_file(out.path, outputs[j].path)) {
        throw UsageFailure(std::string(outputs[j].role) + " and " + std::string(out.role) +
                           " are one file " + quoted(out.path) + "; give each its own name");
      }
    }
  }
}

void write_output_file(const fs::path& path, std::string_view content, std::string_view option) {
  try {
    write_file_atomically(path, content);
  } catch (const Error& e) {
    throw OutputFailure(std::string(option) + " " + quoted(path) + ": cannot be written (" +
                        e.what() + "); give a path in a folder that exists and is writable");
  }
}

void write_json_output(const fs::path& path, const nlohmann::json& json) {
  write_output_file(path, report::json_text(json, 1) + "\n", "--json");
}

InputFile read_input(const fs::path& path, std::string_view role) {
  InputFile file;
  file.path = path;
  std::string bytes = read_file_bytes(path, role);
  switch (detect_trace_format(bytes)) {
    case TraceFormat::pickle:
    case TraceFormat::rmm_log:
      file.kind = InputKind::trace;
      file.bytes = std::move(bytes);
      return file;
    case TraceFormat::unknown:
      file.looks_like = bytes.empty() ? "an empty file" : "neither JSON, a pickle nor an RMM log";
      return file;
    case TraceFormat::json:
      break;
  }
  // Saved metrics (one flat object of numbers, strings and booleans, Python's NaN too; {} is
  // what save_metrics writes for none) are parsed once, from these bytes, with no JSON tree: the
  // path may be a pipe that cannot be read twice, and a tree of millions of keys took gigabytes
  // (issue 44). One with a "format" key may be an envelope: the tree below decides.
  std::optional<Metrics> metrics = parse_metrics(bytes);
  if (metrics && !metrics->contains("format")) {
    file.kind = InputKind::metrics;
    file.metrics = std::move(*metrics);
    return file;
  }
  // parse_json_text: the \udcXY escapes memscope writes for bytes that are not UTF-8 read back.
  nlohmann::json json = report::parse_json_text(bytes, /*allow_exceptions=*/false);
  if (json.is_discarded() && metrics) {  // NaN and a "format" key: metrics all the same
    file.kind = InputKind::metrics;
    file.metrics = std::move(*metrics);
    return file;
  }
  if (json.is_discarded()) {
    // Parse again to get the position and reason; only the failing path pays for it.
    try {
      json = report::parse_json_text(bytes);
    } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e999
      throw InputFailure(std::string(role) + " " + quoted(path) + ": not valid JSON (" + e.what() +
                         ")");
    }
  }
  const std::optional<std::string> envelope = report::envelope_kind(json);
  if (envelope == "run") {
    file.kind = InputKind::run;
  } else if (envelope == "replay") {
    file.kind = InputKind::replay;
  } else if (envelope == "estimate") {
    file.kind = InputKind::estimate;
  } else if (is_trace_json(json)) {
    file.kind = InputKind::trace;
    file.json = nullptr;
    file.bytes = std::move(bytes);  // read_trace() parses it again with its own checks
    return file;
  } else if (metrics) {
    file.kind = InputKind::metrics;
    file.metrics = std::move(*metrics);
    return file;
  } else {
    file.looks_like = describe(json);
    return file;
  }
  file.json = std::move(json);
  return file;
}

}  // namespace memscope::cli
