// `memscope diff A B`: two files of the same kind side by side, the biggest growth first.
//
// - Two saved metrics files: per stage and key, A, B, the change and the change in percent;
//   memory keys (is_memory_key(), metrics.hpp) first, by the largest absolute change.
// - Two run recordings: the run's duration and tree RSS peak, per stage (matched by name and
//   occurrence) its duration, sampled tree RSS peak, GPU peak and end-mark figures, and per
//   command (matched by command line and occurrence) its peak RSS.
// - Two traces: each replayed with the default settings; live bytes by allocation site (the
//   innermost frame of user code, as replay's top sites) at the moment of peak live bytes and
//   at the end of the trace, plus peak reserved and peak live of both.
// Each ends with a summary line ("peak live +312.00 MiB (+14.0%), mostly model.py:212 forward").
//
// The diffs return values (MetricsDiff, RunDiff, TraceDiff) and format nothing: to_report()
// builds the report::Report the terminal (report::render_text) and the page (report::write_html)
// show, to_json() the memscope-diff object of --json: {"format": "memscope-diff", "version": 1,
// "kind", "a", "b", "summary", ...the kind's rows as arrays of objects}; memory in bytes, times
// in seconds.
//
// Thread safety: plain values and pure functions. Errors: the library's (TraceFormatError for a
// trace that contradicts itself); nothing else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "memscope/metrics.hpp"
#include "memscope/report.hpp"
#include "memscope/trace_events.hpp"
#include "run/run_record.hpp"

namespace memscope::cli {

struct DiffNames {
  std::string a;  // the files as given
  std::string b;
  std::size_t top = 20;  // rows shown per table (the JSON has them all)
};

// Two metrics files, key by key.
struct MetricsDiff {
  enum class Kind { memory, seconds, number, text };
  // Key and values point into the Metrics given to diff_metrics(), which must outlive the
  // diff: two files of millions of keys held them twice more as copies (issue 44).
  struct Row {
    std::string_view key;
    Kind kind = Kind::number;
    const MetricValue* a = nullptr;  // null: only in the other file
    const MetricValue* b = nullptr;
    [[nodiscard]] bool numeric_both() const noexcept;
    [[nodiscard]] double change() const noexcept;  // b - a; 0 unless numeric_both()
  };
  DiffNames names;
  std::vector<Row> rows;  // memory first by the largest change, then by relative change
  std::string summary;
  [[nodiscard]] report::Report to_report() const;
  [[nodiscard]] nlohmann::json to_json() const;
};

// Two run recordings, stage by stage and process by process.
struct RunDiff {
  struct Line {
    std::string where;  // stage or command
    std::string figure;
    bool bytes = true;        // else seconds
    std::optional<double> a;  // none: unknown, or absent from that run
    std::optional<double> b;
    std::string matched_by;  // processes: how the two were paired
    [[nodiscard]] bool both() const noexcept { return a && b; }
    [[nodiscard]] double change() const noexcept { return both() ? *b - *a : 0.0; }
  };
  DiffNames names;
  std::vector<Line> overall;  // the whole run: duration, then the tree RSS peak
  std::vector<Line> stages;
  std::vector<Line> commands;  // the largest change first
  std::string summary;
  [[nodiscard]] report::Report to_report() const;
  [[nodiscard]] nlohmann::json to_json() const;
};

// Two traces, allocation site by allocation site.
struct TraceDiff {
  struct Figures {
    std::int64_t device = 0;
    std::size_t events = 0;
    std::int64_t peak_reserved = 0;  // replayed with the default settings on an 80 GiB device
    std::size_t peak_live = 0;
    std::size_t live_at_end = 0;
    std::map<std::string, std::size_t> at_peak;  // site -> live bytes at the peak of live bytes
    std::map<std::string, std::size_t> at_end;
    std::string peak_stage;
  };
  // One allocation site's live bytes at the peak of live bytes and at the end, in A and B.
  struct Site {
    std::string where;
    std::size_t peak_a = 0, peak_b = 0, end_a = 0, end_b = 0;
    [[nodiscard]] std::int64_t peak_change() const noexcept;
    [[nodiscard]] std::int64_t end_change() const noexcept;
  };
  DiffNames names;
  Figures a;
  Figures b;
  std::vector<Site> sites;  // every site of either: the biggest growth at the peak first
  std::string summary;
  [[nodiscard]] report::Report to_report() const;
  [[nodiscard]] nlohmann::json to_json() const;
};

// The rows point into `a` and `b`: they must outlive the result.
[[nodiscard]] MetricsDiff diff_metrics(const Metrics& a, const Metrics& b, const DiffNames& names);
[[nodiscard]] RunDiff diff_runs(const RunRecord& a, const RunRecord& b, const DiffNames& names);
// `device`: the device to compare; none: the first device with events in each trace.
[[nodiscard]] TraceDiff diff_traces(const TorchSnapshot& a, const TorchSnapshot& b,
                                    const DiffNames& names,
                                    std::optional<std::int64_t> device = std::nullopt);

// --fail-above (fail_above.cpp): the peaks of a diff, A against B. A trace's are its peak
// reserved and peak live bytes; a run's its tree RSS peak and every stage's sampled peaks; a
// metrics file's every memory key (is_memory_key()) naming a peak: train_mem_gpu_peaked_delta.
struct PeakChange {
  std::string what;  // "peak reserved", "stage train: GPU peak (sampled)"
  double a = 0.0;
  double b = 0.0;
  // The growth of B over A in percent; infinite when A is 0 and B is not.
  [[nodiscard]] double percent() const noexcept;
};
[[nodiscard]] std::vector<PeakChange> peak_changes(const MetricsDiff& diff);
[[nodiscard]] std::vector<PeakChange> peak_changes(const RunDiff& diff);
[[nodiscard]] std::vector<PeakChange> peak_changes(const TraceDiff& diff);
// The peaks that grew more than `percent` (a negative `percent` fails on any growth below it:
// -5 requires a shrink of 5 %), largest growth first.
[[nodiscard]] std::vector<PeakChange> peaks_above(const std::vector<PeakChange>& peaks,
                                                  double percent);

// Shared by the diff_*.cpp files: "+312.00 MiB", "-1.50 GiB", "0 B".
[[nodiscard]] std::string signed_bytes(std::int64_t change);
// "+14.0%", "-3.2%"; "new" when a is 0 and b is not; "" when both are 0.
[[nodiscard]] std::string percent_change(double a, double b);
// The change in percent as a number for JSON; null when a is 0.
[[nodiscard]] nlohmann::json percent_json(double a, double b);
// The JSON skeleton every diff starts from.
[[nodiscard]] nlohmann::json diff_json(const char* kind, const DiffNames& names,
                                       const std::string& summary);
// "(12 more keys; --top shows more, --json has all)" when `shown` < `total`, else "".
[[nodiscard]] std::string more_note(std::size_t total, std::size_t shown, const char* what);

}  // namespace memscope::cli
