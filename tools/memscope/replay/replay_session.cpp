// Running one `memscope replay` (replay_session.hpp).
#include "replay/replay_session.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <system_error>
#include <utility>

#include "cli.hpp"
#include "input_files.hpp"
#include "memscope/errors.hpp"

namespace memscope::cli {
namespace {

std::string list_devices(const std::vector<std::int64_t>& devices) {
  std::string out;
  for (const std::int64_t d : devices) out += (out.empty() ? "" : ", ") + std::to_string(d);
  return out.empty() ? "none" : out;
}

std::int64_t choose_device(const ReplayRequest& request, const TorchSnapshot& snapshot) {
  const std::vector<std::int64_t> devices = trace_devices(snapshot);
  if (!request.device) {
    if (devices.empty()) {
      throw InputFailure("TRACE '" + request.trace.string() +
                         "': holds no events on any device, so there is nothing to replay; "
                         "record the snapshot with memory history enabled");
    }
    return devices.front();
  }
  if (std::find(devices.begin(), devices.end(), *request.device) == devices.end()) {
    throw UsageFailure(
        fmt::format("--device {}: the trace '{}' has events for devices {}; give "
                    "one of those",
                    *request.device, request.trace.string(), list_devices(devices)));
  }
  return *request.device;
}

std::vector<AllocatorConfig> parse_configs(const std::vector<std::string>& configs) {
  std::vector<AllocatorConfig> out;
  for (const std::string& text : configs) {
    try {
      out.push_back(AllocatorConfig::parse(text));
    } catch (const ConfigError& e) {
      throw UsageFailure("--config '" + text + "': " + e.what());
    }
  }
  return out;
}

}  // namespace

bool ReplayOutcome::fits() const noexcept {
  return best_row() < rows.size();
}

std::size_t ReplayOutcome::best_row() const noexcept {
  std::size_t best = rows.size();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].replay.num_ooms != 0) continue;
    if (best == rows.size() || rows[i].replay.peak_reserved < rows[best].replay.peak_reserved) {
      best = i;
    }
  }
  return best;
}

std::size_t ReplayOutcome::smallest_fit_row() const noexcept {
  std::size_t best = rows.size();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i].fit || !rows[i].fit->fits) continue;
    if (best == rows.size() || rows[i].fit->capacity < rows[best].fit->capacity) best = i;
  }
  return best;
}

std::size_t parse_size_option(const std::string& text, const std::string& option) {
  std::size_t bytes = 0;
  try {
    bytes = parse_size_with_unit(text, option);
  } catch (const ConfigError& e) {
    constexpr const char* kUnits = "(KiB/MiB/GiB/TiB are powers of 1024, KB/MB/GB/TB of 1000)";
    if (text.find_first_not_of("0123456789. \t") == std::string::npos && !text.empty()) {
      throw UsageFailure(std::string(e.what()) + " " + kUnits);  // a number without its unit
    }
    throw UsageFailure(option + " '" + text +
                       "': not a size; write a number with a unit, e.g. 24GiB, 80GB, 512MiB "
                       "(KiB/MiB/GiB/TiB are powers of 1024, KB/MB/GB/TB of 1000)");
  }
  if (bytes == 0) {
    throw UsageFailure(option + " '" + text + "': must be more than 0 bytes, e.g. 24GiB");
  }
  return bytes;
}

ReplayOutcome run_replay(const ReplayRequest& request, Progress& progress) {
  ReplayOutcome out;
  out.trace = request.trace;
  out.configs = request.configs.empty() ? std::vector<std::string>{""} : request.configs;
  // "default" names the defaults, as the tables print them (an empty argument is awkward to
  // type and some parsers drop it).
  for (std::string& c : out.configs) {
    if (c == "default") c.clear();
  }
  out.parsed = parse_configs(out.configs);  // before the (slow) read: a typo fails at once
  out.capacity_given = request.capacity.has_value();
  out.capacity = request.capacity.value_or(80 * GiB);

  progress.phase(request.progress_prefix + "reading " + request.trace.filename().string());
  out.snapshot = request.trace_bytes != nullptr
                     ? read_trace(*request.trace_bytes, request.trace.string())
                     : read_trace(read_file_bytes(request.trace, "TRACE"), request.trace.string());
  out.device = choose_device(request, out.snapshot);
  out.plan = build_replay_plan(out.snapshot, out.device);

  if (out.configs.size() == 1) {
    progress.phase(request.progress_prefix + "replaying");
    ReplayOptions options;
    options.config = out.parsed.front();
    options.capacity = out.capacity;
    options.record_series = true;  // locates the peak and feeds the report's chart
    options.peak_layout = true;    // the report's segment map
    options.top_sites = request.top_sites;
    out.first = replay(out.plan, options);
    explain_with_trace(out.snapshot, out.plan, out.first, request.top_sites);
    ComparisonRow row{out.first, std::nullopt};
    row.replay.series.clear();  // the rows carry figures only
    row.replay.peak_layout.reset();
    if (request.fit) {
      progress.phase(request.progress_prefix + "searching the smallest device");
      FitOptions fit;
      fit.config = out.parsed.front();
      fit.precision = request.precision;
      row.fit = fit_capacity(out.plan, fit);
      row.fit->config = out.configs.front();
    }
    out.rows.push_back(std::move(row));
    return out;
  }

  progress.phase(request.progress_prefix +
                 fmt::format("replaying {} settings{}", out.configs.size(),
                             request.fit ? " and searching the smallest device for each" : ""));
  CompareOptions compare;
  compare.capacity = out.capacity;
  compare.device = out.device;
  compare.fit = request.fit;
  compare.fit_precision = request.precision;
  compare.top_sites = request.top_sites;
  Comparison comparison = compare_settings(out.snapshot, out.configs, compare);
  out.rows = std::move(comparison.rows);
  out.first = out.rows.front().replay;
  if (request.series) {
    // The comparison keeps no series; the report's chart needs the first setting's.
    progress.phase(request.progress_prefix + "replaying the first setting for the report");
    ReplayOptions options;
    options.config = out.parsed.front();
    options.capacity = out.capacity;
    options.record_series = true;
    options.peak_layout = true;
    options.top_sites = request.top_sites;
    out.first = replay(out.plan, options);
    explain_with_trace(out.snapshot, out.plan, out.first, request.top_sites);
  }
  return out;
}

}  // namespace memscope::cli
