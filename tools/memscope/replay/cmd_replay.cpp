// memscope replay TRACE: would this trace fit, where is its peak and what was live there, how do
// allocator settings compare, and what is the smallest device it fits on (replay_session.hpp,
// replay_output.hpp). Exit 1 when --capacity was given and no setting fits in it.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli.hpp"
#include "commands.hpp"
#include "input_files.hpp"
#include "memscope/errors.hpp"
#include "memscope/report_html.hpp"
#include "memscope/report_text.hpp"
#include "progress.hpp"
#include "replay/replay_output.hpp"
#include "replay/replay_session.hpp"

namespace memscope::cli {
namespace {

struct ReplayArgs {
  std::string trace;
  std::int64_t device = -1;  // -1: the first device with a trace
  std::string capacity;
  std::vector<std::string> configs;
  bool fit = false;
  std::string precision = "2MiB";
  std::size_t top = 10;
  std::string json;
  std::string html;
};

int run_replay_command(const ReplayArgs& args) {
  check_outputs({{"TRACE", args.trace}}, {{"--json", args.json}, {"--html", args.html}});
  ReplayRequest request;
  request.trace = args.trace;
  if (args.device >= 0) request.device = args.device;
  if (!args.capacity.empty()) request.capacity = parse_size_option(args.capacity, "--capacity");
  request.configs = args.configs;
  request.fit = args.fit;
  request.precision = parse_size_option(args.precision, "--precision");
  request.top_sites = args.top;
  request.series = !args.html.empty() || !args.json.empty();

  ReplayOutcome outcome;
  report::Report report;
  {
    Progress progress("memscope replay");
    outcome = run_replay(request, progress);
    progress.phase("memscope replay: building the report");
    report = replay_report(outcome);
  }
  // The text, the page and the JSON's "report" are one value: `memscope report` of the JSON
  // prints this text again.
  std::fputs(report::render_text(report).c_str(), stdout);
  if (!args.json.empty()) {
    write_json_output(args.json, replay_json(outcome, report));
    std::printf("replay JSON: %s\n", args.json.c_str());
  }
  if (!args.html.empty()) {
    report::write_html(report, args.html);
    std::printf("HTML report: %s\n", args.html.c_str());
  }
  std::fflush(stdout);
  return outcome.capacity_given && !outcome.fits() ? kExitNegative : kExitOk;
}

}  // namespace

void add_replay_command(CLI::App& app, Action& action) {
  CLI::App* sub = app.add_subcommand(
      "replay",
      "Replay a memory trace (PyTorch snapshot pickle or JSON, memscope trace JSON, RMM log) "
      "through memscope's caching allocator on a simulated device: the peak, what was live at "
      "the peak by allocation site, settings side by side, and the smallest device that fits. "
      "Exits 1 when --capacity is given and the trace does not fit in it.");
  auto args = std::make_shared<ReplayArgs>();
  sub->add_option("TRACE", args->trace, "the trace file")->required();
  sub->add_option("--device", args->device,
                  "the device whose trace to replay (default: the first with events)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--capacity", args->capacity,
                  "the simulated device's memory, e.g. 24GiB, 80GB (default 80GiB); when given, "
                  "says whether the trace fits and exits 1 when it does not");
  sub->add_option("--config", args->configs,
                  "allocator settings, e.g. \"max_split_size:256MiB,roundup_power2_divisions:4\" "
                  "(MEMSCOPE_ALLOC_CONF syntax; \"default\" for the defaults); repeat to compare "
                  "several; default: the defaults")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_flag("--fit", args->fit, "search the smallest device each setting fits on");
  sub->add_option("--precision", args->precision, "granularity of the --fit search (default 2MiB)");
  sub->add_option("--top", args->top, "allocation sites listed at the peak (default 10)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--json", args->json,
                  "write the results as JSON (format memscope-replay), for `memscope report`");
  sub->add_option("--html", args->html, "write a self-contained HTML report");
  sub->callback([&action, args] { action = [args] { return run_replay_command(*args); }; });
}

}  // namespace memscope::cli
