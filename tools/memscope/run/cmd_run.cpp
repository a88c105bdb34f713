// memscope run [--interval MS] [--json FILE] [--html FILE] [--quiet] [--watch DIR] -- CMD ARGS...
// Runs CMD, watches its process tree (run_session.hpp), prints the summary and writes the
// recording. Exit code: the command's own, 128+N when a signal killed it, 126/127 when it could
// not be executed, 125 when memscope itself failed (main() maps our exceptions to 125).
#include <CLI/CLI.hpp>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli.hpp"
#include "commands.hpp"
#include "input_files.hpp"
#include "memscope/errors.hpp"
#include "memscope/report_html.hpp"
#include "run/run_record.hpp"
#include "run/run_report.hpp"
#include "run/run_session.hpp"
#include "run/run_summary.hpp"

namespace memscope::cli {
namespace {

constexpr int kMaxIntervalMs = 3'600'000;

struct RunArguments {
  std::string interval = "100";
  std::string json;
  std::string html;
  bool quiet = false;
  bool no_gpu = false;
  std::string watch;  // --watch DIR: MEMSCOPE_WATCH for the command's Python processes
  std::vector<std::string> command;
};

int parse_interval(const std::string& text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 1 ||
      value > kMaxIntervalMs) {
    throw UsageFailure("--interval: '" + text +
                       "' is not a sampling interval; give whole milliseconds from 1 to " +
                       std::to_string(kMaxIntervalMs) + " (e.g. --interval 100)");
  }
  return value;
}

// Both files are attempted even when one fails, so one bad path does not lose the other.
void write_outputs(const RunArguments& args, const RunRecord& record) {
  std::exception_ptr failure;
  if (!args.json.empty()) {
    try {
      write_json_output(args.json, run_record_to_json(record));
    } catch (const OutputFailure&) {
      failure = std::current_exception();
    }
  }
  if (!args.html.empty()) {
    try {
      report::write_html(report_of_run(record), args.html);
    } catch (const OutputFailure&) {
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

int run(const RunArguments& args) {
  if (args.command.empty()) {
    throw UsageFailure("no command to run; give it after '--' (memscope run -- python train.py)");
  }
  RunOptions options;
  options.interval_ms = parse_interval(args.interval);
  options.command = args.command;
  options.watch_gpu = !args.no_gpu;
  check_outputs({}, {{"--json", args.json}, {"--html", args.html}});
  if (!args.watch.empty()) {
    // The command's `import memscope` honours it (docs/oom.md): memscope.torch.watch(DIR) once
    // torch is imported. Set in our own environment, which the command inherits; memscope run
    // has one thread.
    std::error_code error;
    const std::filesystem::path dir = std::filesystem::absolute(args.watch, error);
    ::setenv("MEMSCOPE_WATCH", (error ? args.watch : dir.string()).c_str(),  // NOLINT
             1);
  }

  const RunResult result = run_and_watch(options);
  if (!result.ran) {
    std::fprintf(stderr, "memscope run: error: %s\n", result.error.c_str());
    return result.exit_code;
  }
  // The recording first, so that trouble on stdout cannot lose it; and a closed stdout
  // (`memscope run ... | head -1`) is EPIPE, not death by SIGPIPE. (Only now: the command,
  // started above, must not inherit an ignored SIGPIPE.)
  (void)std::signal(SIGPIPE, SIG_IGN);
  std::exception_ptr output_failure;
  try {
    write_outputs(args, result.record);
  } catch (const OutputFailure&) {
    output_failure = std::current_exception();  // after the summary, which still shows the run
  }
  if (!args.quiet) {
    std::fflush(stderr);
    std::fputs(("\n" + format_run_summary(result.record)).c_str(), stdout);
    std::fflush(stdout);
  }
  if (output_failure) std::rethrow_exception(output_failure);
  return result.exit_code;
}

}  // namespace

void add_run_command(CLI::App& app, Action& action) {
  CLI::App* sub = app.add_subcommand(
      "run",
      "Run a command and watch its whole process tree: each process's exact peak RSS (the "
      "kernel's VmHWM), RSS and GPU memory over time, the tree's summed RSS (sampled), and the "
      "stage marks its trackers write. Exits with the command's own exit code (128+N if signal "
      "N killed it; 125 if memscope failed, 126 not executable, 127 not found).");
  auto args = std::make_shared<RunArguments>();
  sub->add_option("--interval", args->interval,
                  "sampling interval in milliseconds for RSS and GPU memory over time (default "
                  "100); per-process peaks do not depend on it")
      ->type_name("MS");
  sub->add_option("--json", args->json, "write the recording (memscope-run JSON) to FILE")
      ->type_name("FILE");
  sub->add_option("--html", args->html, "write a self-contained HTML report to FILE")
      ->type_name("FILE");
  sub->add_flag("--quiet,-q", args->quiet, "print no summary at the end");
  sub->add_flag("--no-gpu", args->no_gpu, "do not query NVML for GPU memory");
  sub->add_option("--watch", args->watch,
                  "explain out-of-memory errors of the command's PyTorch processes in DIR: sets "
                  "MEMSCOPE_WATCH=DIR, which `import memscope` honours (memscope.torch.watch: "
                  "oom-rank{R}-pid{P}.pickle, its report, and the explanation on stderr)")
      ->type_name("DIR");
  sub->add_option("command", args->command, "the command to run and its arguments, after '--'")
      ->type_name("CMD ARGS");
  // Everything from the command's name on belongs to the command, even without '--'.
  sub->positionals_at_end();
  sub->callback([&action, args] { action = [args] { return run(*args); }; });
}

}  // namespace memscope::cli
