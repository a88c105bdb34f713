// memscope diff A B: two metrics files, two run recordings or two traces side by side, the
// biggest growth first (diff.hpp).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cli.hpp"
#include "commands.hpp"
#include "diff/diff.hpp"
#include "input_files.hpp"
#include "memscope/errors.hpp"
#include "memscope/report_html.hpp"
#include "memscope/report_text.hpp"
#include "memscope/trace.hpp"
#include "memscope/units.hpp"
#include "progress.hpp"
#include "run/run_record.hpp"

namespace memscope::cli {
namespace {

struct DiffArgs {
  std::string a;
  std::string b;
  std::string json;
  std::string html;
  std::size_t top = 20;
  std::int64_t device = -1;
  std::optional<double> fail_above;  // percent
};

std::string kind_phrase(const InputFile& f) {
  switch (f.kind) {
    case InputKind::metrics:
      return "saved metrics";
    case InputKind::unknown:
      return "of no kind memscope knows (" + f.looks_like + ")";
    default:
      return std::string("a ") + to_string(f.kind);
  }
}

std::string peak_value(double bytes) {
  return format_bytes(static_cast<std::int64_t>(bytes));
}

// --fail-above: kExitNegative, with one line per peak that grew more, when B's peaks grew by
// more than the percentage (or when no peak is known in both files: nothing was checked).
int check_peaks(const std::vector<PeakChange>& peaks, const DiffArgs& args) {
  if (!args.fail_above) return kExitOk;
  const double limit = *args.fail_above;
  if (peaks.empty()) {
    std::fprintf(stderr,
                 "memscope diff: --fail-above %g: no peak is known in both files, so none was "
                 "checked\n",
                 limit);
    return kExitNegative;
  }
  const std::vector<PeakChange> above = peaks_above(peaks, limit);
  for (const PeakChange& p : above) {
    const std::string growth = std::isinf(p.percent()) ? std::string("from nothing")
                                                       : fmt::format("{:+.1f}%", p.percent());
    std::fprintf(stderr, "memscope diff: %s grew %s (%s -> %s), more than --fail-above %g%%\n",
                 p.what.c_str(), growth.c_str(), peak_value(p.a).c_str(), peak_value(p.b).c_str(),
                 limit);
  }
  if (above.empty()) {
    std::fprintf(stderr, "memscope diff: %zu peak%s within --fail-above %g%%\n", peaks.size(),
                 peaks.size() == 1 ? "" : "s", limit);
  }
  return above.empty() ? kExitOk : kExitNegative;
}

// The terminal's text, then --json and --html, all from the one value; then --fail-above's
// verdict, the exit status.
template <typename Result>
int emit(const Result& result, const DiffArgs& args) {
  const report::Report report = result.to_report();
  std::fputs(report::render_text(report).c_str(), stdout);
  if (!args.json.empty()) {
    write_json_output(args.json, result.to_json());
    std::printf("diff JSON: %s\n", args.json.c_str());
  }
  if (!args.html.empty()) {
    report::write_html(report, args.html);
    std::printf("HTML report: %s\n", args.html.c_str());
  }
  std::fflush(stdout);
  return check_peaks(peak_changes(result), args);
}

int run_diff_command(const DiffArgs& args) {
  check_outputs({{"A", args.a}, {"B", args.b}}, {{"--json", args.json}, {"--html", args.html}});
  Progress progress("memscope diff");
  progress.phase("memscope diff: reading " + args.a);
  const InputFile a = read_input(args.a, "A");
  progress.phase("memscope diff: reading " + args.b);
  const InputFile b = read_input(args.b, "B");
  for (const InputFile* f : {&a, &b}) {
    if (f->kind == InputKind::unknown) {
      throw InputFailure(
          fmt::format("{} '{}' is {}; diff compares two files of one of these "
                      "kinds: {}",
                      f == &a ? "A" : "B", f->path.string(), kind_phrase(*f), understood_kinds()));
    }
    if (f->kind == InputKind::replay || f->kind == InputKind::estimate) {
      throw InputFailure(fmt::format(
          "{} '{}' is {}; diff compares two traces (give the trace files{}), two metrics "
          "files or two run recordings",
          f == &a ? "A" : "B", f->path.string(), kind_phrase(*f),
          f->kind == InputKind::estimate ? ": memscope estimate --snapshot writes one" : ""));
    }
  }
  if (a.kind != b.kind) {
    throw InputFailure(
        fmt::format("A '{}' is {} and B '{}' is {}; diff compares two files of the "
                    "same kind (two metrics files, two run recordings or two "
                    "traces)",
                    args.a, kind_phrase(a), args.b, kind_phrase(b)));
  }
  const DiffNames names{args.a, args.b, args.top};
  int status = kExitOk;
  switch (a.kind) {
    case InputKind::metrics: {
      const MetricsDiff diff = diff_metrics(a.metrics, b.metrics, names);
      progress.finish();
      status = emit(diff, args);
      break;
    }
    case InputKind::run: {
      const RunDiff diff = diff_runs(run_record_from_json(a.json, args.a),
                                     run_record_from_json(b.json, args.b), names);
      progress.finish();
      status = emit(diff, args);
      break;
    }
    case InputKind::trace: {
      progress.phase("memscope diff: reading the traces");
      const TorchSnapshot ta = read_trace(a.bytes, args.a);
      const TorchSnapshot tb = read_trace(b.bytes, args.b);
      progress.phase("memscope diff: replaying both traces");
      const TraceDiff diff =
          diff_traces(ta, tb, names,
                      args.device >= 0 ? std::optional<std::int64_t>(args.device) : std::nullopt);
      progress.finish();
      status = emit(diff, args);
      break;
    }
    case InputKind::replay:
    case InputKind::estimate:
    case InputKind::unknown:
      break;  // refused above
  }
  std::fflush(stdout);
  return status;
}

}  // namespace

void add_diff_command(CLI::App& app, Action& action) {
  CLI::App* sub = app.add_subcommand(
      "diff",
      "Compare two files of the same kind, the biggest growth first: two saved metrics files "
      "(per stage and key), two `memscope run` recordings (per stage and per command), or two "
      "traces (live bytes by allocation site at the peak and at the end).");
  auto args = std::make_shared<DiffArgs>();
  sub->add_option("A", args->a, "the first file (the baseline)")->required();
  sub->add_option("B", args->b, "the second file")->required();
  sub->add_option("--json", args->json, "also write the comparison as JSON (memscope-diff)");
  sub->add_option("--html", args->html, "write a self-contained HTML report");
  sub->add_option("--top", args->top, "rows shown per table (default 20; --json has all)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--device", args->device,
                  "traces: the device to compare (default: the first with events in each)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--fail-above", args->fail_above,
                  "exit 1 when a peak of B grew by more than PCT percent over A's (traces: peak "
                  "reserved and peak live; runs: the tree RSS peak and each stage's peaks; "
                  "metrics: the memory keys naming a peak); the peaks that did are named on "
                  "stderr")
      ->type_name("PCT");
  sub->callback([&action, args] { action = [args] { return run_diff_command(*args); }; });
}

}  // namespace memscope::cli
