// Fuzz target: the JSON files the memscope command reads back (`memscope report FILE` and
// `memscope diff A B`): run recordings (memscope run --json), replay results (memscope replay
// --json, with the report inside) and saved metrics. Each input is a file, told apart by
// content as the command does, then read, summarised, diffed against itself and rendered as
// HTML. Any input is either read or refused with a typed error (InputFailure, memscope::Error);
// nothing else may escape (a nlohmann type_error would exit 5), nothing may crash or hang.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "cli.hpp"
#include "diff/diff.hpp"
#include "input_files.hpp"
#include "memscope/errors.hpp"
#include "memscope/metrics.hpp"
#include "memscope/report_html.hpp"
#include "memscope/report_json.hpp"
#include "memscope/report_text.hpp"
#include "replay/replay_output.hpp"
#include "report/report_builders.hpp"
#include "run/run_record.hpp"
#include "run/run_report.hpp"
#include "run/run_summary.hpp"

namespace {

using memscope::cli::InputKind;

// One in-memory file for every input: read_input() takes a path, as the command does.
const std::string& input_path(int& fd) {
  static std::string path;
  if (path.empty()) {
    fd = ::memfd_create("fuzz_cli_json", 0);
    if (fd < 0) std::abort();
    path = "/proc/self/fd/" + std::to_string(fd);
  }
  return path;
}

void exercise(const std::string& path) {
  using namespace memscope::cli;
  using memscope::RunRecord;  // the library's (include/memscope/watched_run.hpp)
  const InputFile file = read_input(path, "FILE");
  const DiffNames names{"a", "b", 5};
  switch (file.kind) {
    case InputKind::run: {
      const RunRecord record = run_record_from_json(file.json, "fuzz");
      (void)format_run_summary(record);
      (void)memscope::report::render_html(report_of_run(record));
      const RunDiff diff = diff_runs(record, record, names);
      (void)memscope::report::render_text(diff.to_report());
      (void)memscope::report::json_text(diff.to_json(), 1);
      (void)memscope::report::json_text(run_record_to_json(record), 1);
      break;
    }
    case InputKind::replay: {
      const memscope::report::Report report = saved_replay_report(file.json, "fuzz");
      (void)memscope::report::render_text(report);
      (void)memscope::report::render_html(report);
      break;
    }
    case InputKind::metrics: {
      // As the command does: the metrics read_input() parsed (load_metrics() reads the same).
      const memscope::Metrics& metrics = file.metrics;
      (void)memscope::load_metrics(path);
      (void)memscope::report::render_html(
          report_of_metrics(metrics, "fuzz", memscope::report::HtmlOptions{}.max_table_rows));
      const MetricsDiff diff = diff_metrics(metrics, metrics, names);
      (void)memscope::report::render_text(diff.to_report());
      (void)memscope::report::json_text(diff.to_json(), 1);
      break;
    }
    case InputKind::estimate: {  // memscope estimate --json, read back by memscope report
      const memscope::report::Report report = report_of_estimate(file.json, "fuzz");
      (void)memscope::report::render_text(report);
      (void)memscope::report::render_html(report);
      break;
    }
    case InputKind::trace:  // fuzz_pickle, fuzz_snapshot_json and fuzz_rmm_log cover these
    case InputKind::unknown:
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static int fd = -1;
  const std::string& path = input_path(fd);
  if (::ftruncate(fd, 0) != 0) std::abort();
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) std::abort();
    done += static_cast<std::size_t>(n);
  }
  try {
    exercise(path);
  } catch (const memscope::cli::InputFailure&) {
    // Refused with a typed error naming the input: the expected outcome for most inputs.
  } catch (const memscope::Error&) {
    // load_metrics' own typed errors (and TraceFormatError from reading).
  }
  return 0;
}
