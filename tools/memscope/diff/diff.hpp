// `memscope diff A B`: two files of the same kind side by side, the biggest growth first.
//
// - Two saved metrics files: per stage and key, A, B, the change and the change in percent;
//   memory keys (containing "_mem_") first, by the largest absolute change.
// - Two run recordings: the run's duration and tree RSS peak, per stage (matched by name and
//   occurrence) its duration, sampled tree RSS peak, GPU peak and end-mark figures, and per
//   command (matched by command line and occurrence) its peak RSS.
// - Two traces: each replayed with the default settings; live bytes by allocation site (the
//   innermost frame of user code, as replay's top sites) at the moment of peak live bytes and
//   at the end of the trace, plus peak reserved and peak live of both.
// Each ends with a summary line ("peak live +312.00 MiB (+14.0%), mostly model.py:212 forward").
//
// JSON (diff --json): {"format": "memscope-diff", "version": 1, "kind", "a", "b", "summary",
// ...the kind's tables as arrays of objects}; memory in bytes, times in seconds.
//
// Thread safety: pure functions. Errors: the library's (TraceFormatError for a trace that
// contradicts itself); nothing else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "memscope/metrics.hpp"
#include "memscope/trace_events.hpp"
#include "run/run_record.hpp"

namespace memscope::cli {

struct DiffOutput {
  std::string text;     // tables and the summary line, for stdout
  std::string summary;  // the one-line summary (also the last line of text)
  nlohmann::json json;
};

struct DiffNames {
  std::string a;  // the files as given
  std::string b;
  std::size_t top = 20;  // rows printed per table (the JSON has them all)
};

[[nodiscard]] DiffOutput diff_metrics(const Metrics& a, const Metrics& b, const DiffNames& names);
[[nodiscard]] DiffOutput diff_runs(const RunRecord& a, const RunRecord& b, const DiffNames& names);
// `device`: the device to compare; none: the first device with events in each trace.
[[nodiscard]] DiffOutput diff_traces(const TorchSnapshot& a, const TorchSnapshot& b,
                                     const DiffNames& names,
                                     std::optional<std::int64_t> device = std::nullopt);

// Shared by the diff_*.cpp files: "+312.00 MiB", "-1.50 GiB", "0 B".
[[nodiscard]] std::string signed_bytes(std::int64_t change);
// "+14.0%", "-3.2%"; "new" when a is 0 and b is not; "" when both are 0.
[[nodiscard]] std::string percent_change(double a, double b);
// The change in percent as a number for JSON; null when a is 0.
[[nodiscard]] nlohmann::json percent_json(double a, double b);
// The JSON skeleton every diff starts from.
[[nodiscard]] nlohmann::json diff_json(const char* kind, const DiffNames& names);

}  // namespace memscope::cli
