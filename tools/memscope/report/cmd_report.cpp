// memscope report FILE: a saved result as aligned text tables, or with --html as a page. The
// file's kind is told by its content (input_files.hpp): saved metrics, a run recording, a
// replay result, or a trace (replayed with the default settings, as `memscope replay` does).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "cli.hpp"
#include "commands.hpp"
#include "input_files.hpp"
#include "memscope/errors.hpp"
#include "memscope/metrics.hpp"
#include "memscope/report_html.hpp"
#include "memscope/report_text.hpp"
#include "progress.hpp"
#include "replay/replay_output.hpp"
#include "replay/replay_session.hpp"
#include "report/report_builders.hpp"
#include "run/run_record.hpp"
#include "run/run_report.hpp"
#include "run/run_summary.hpp"

namespace memscope::cli {
namespace {

struct ReportArgs {
  std::string file;
  std::string html;
};

// save_metrics names its files {split}_results.json: the split heads the table.
std::string split_of(const std::filesystem::path& path) {
  std::string stem = path.stem().string();
  constexpr std::string_view kSuffix = "_results";
  if (stem.size() > kSuffix.size() && stem.ends_with(kSuffix)) {
    stem.resize(stem.size() - kSuffix.size());
  }
  return stem;
}

struct Rendered {
  std::string text;
  std::optional<report::Report> report;  // when --html was asked for
};

Rendered render(const InputFile& file, bool html, Progress& progress) {
  const std::string source = file.path.string();
  Rendered out;
  switch (file.kind) {
    case InputKind::metrics:
      out.text = format_metrics_table(split_of(file.path), file.metrics);
      if (html) {
        out.report = report_of_metrics(file.metrics, source, report::HtmlOptions{}.max_table_rows);
      }
      break;
    case InputKind::run: {
      const RunRecord record = run_record_from_json(file.json, source);
      out.text = format_run_summary(record);
      if (html) out.report = report_of_run(record);
      break;
    }
    case InputKind::replay: {
      // What `memscope replay` printed: the text of the Report the file carries.
      report::Report report = saved_replay_report(file.json, source);
      out.text = report::render_text(report);
      if (html) out.report = std::move(report);
      break;
    }
    case InputKind::estimate: {
      report::Report report = report_of_estimate(file.json, source);
      out.text = report::render_text(report);
      if (html) out.report = std::move(report);
      break;
    }
    case InputKind::trace: {
      ReplayRequest request;
      request.trace = file.path;
      request.trace_bytes = &file.bytes;
      request.series = html;
      request.progress_prefix = "memscope report: ";
      const ReplayOutcome outcome = run_replay(request, progress);
      report::Report report = replay_report(outcome);
      out.text = report::render_text(report);
      if (html) out.report = std::move(report);
      break;
    }
    case InputKind::unknown:
      throw InputFailure(
          fmt::format("FILE '{}' is {}, not a kind memscope report knows; it "
                      "reads {}",
                      source, file.looks_like, understood_kinds()));
  }
  return out;
}

int run_report_command(const ReportArgs& args) {
  check_outputs({{"FILE", args.file}}, {{"--html", args.html}});
  Rendered rendered;
  {
    Progress progress("memscope report");
    progress.phase("memscope report: reading " + args.file);
    const InputFile file = read_input(args.file, "FILE");
    rendered = render(file, !args.html.empty(), progress);
  }
  std::fputs(rendered.text.c_str(), stdout);
  if (rendered.report) {
    report::write_html(*rendered.report, args.html);
    std::printf("HTML report: %s\n", args.html.c_str());
  }
  std::fflush(stdout);
  return kExitOk;
}

}  // namespace

void add_report_command(CLI::App& app, Action& action) {
  CLI::App* sub = app.add_subcommand(
      "report",
      "Show a saved result as aligned tables, or as a self-contained HTML page with --html: "
      "saved metrics (save_metrics JSON), a run recording (memscope run --json), a replay "
      "result (memscope replay --json) or a trace (replayed with the default settings). The "
      "kind is told from the content.");
  auto args = std::make_shared<ReportArgs>();
  sub->add_option("FILE", args->file, "the file to show")->required();
  sub->add_option("--html", args->html, "write a self-contained HTML page");
  sub->callback([&action, args] { action = [args] { return run_report_command(*args); }; });
}

}  // namespace memscope::cli
