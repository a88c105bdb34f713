// memscope: the command. Parses the subcommand with CLI11, runs it, and turns what went wrong
// into the exit codes of cli.hpp (docs/cli.md) with one "memscope <sub>: error: ..." line.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>

#include "cli.hpp"
#include "commands.hpp"
#include "memscope/errors.hpp"

#ifndef MEMSCOPE_VERSION
#define MEMSCOPE_VERSION "unknown"
#endif

namespace {

using namespace memscope::cli;

// `memscope run` reserves its child's exit codes: its own failures all exit 125.
int code_for(bool in_run, int code) {
  return in_run && code != kExitOk ? kExitRunFailed : code;
}

int report(const std::string& who, const char* what, int code) {
  std::fprintf(stderr, "%s: error: %s\n", who.c_str(), what);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "memscope: where memory goes. Watch a command's processes (run), replay and explain a "
      "trace (replay), render saved results (report), compare two (diff), see the machine "
      "(info), and estimate a training step without a GPU (estimate: runs python3 -m "
      "memscope.estimate, needs PyTorch). Exit codes: docs/cli.md.",
      "memscope"};
  app.set_version_flag("--version", std::string("memscope ") + MEMSCOPE_VERSION);
  app.require_subcommand(1);
  app.fallthrough(false);

  Action action;
  add_info_command(app, action);
  add_run_command(app, action);
  add_replay_command(app, action);
  add_report_command(app, action);
  add_diff_command(app, action);
  add_estimate_command(app, action);

  auto subcommand_name = [&app]() -> std::string {
    for (const CLI::App* sub : app.get_subcommands()) return "memscope " + sub->get_name();
    return "memscope";
  };
  auto in_run = [&app]() {
    for (const CLI::App* sub : app.get_subcommands()) {
      if (sub->get_name() == "run") return true;
    }
    return false;
  };

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::fprintf(stderr, "%s: error: %s\nRun '%s --help' for the options.\n",
                 subcommand_name().c_str(), e.what(), subcommand_name().c_str());
    return code_for(in_run(), kExitUsage);
  }

  const std::string who = subcommand_name();
  const bool run = in_run();
  try {
    return action ? action() : kExitOk;
  } catch (const UsageFailure& e) {
    return report(who, e.what(), code_for(run, kExitUsage));
  } catch (const InputFailure& e) {
    return report(who, e.what(), code_for(run, kExitInput));
  } catch (const OutputFailure& e) {
    return report(who, e.what(), code_for(run, kExitOutput));
  } catch (const memscope::ConfigError& e) {
    return report(who, e.what(), code_for(run, kExitUsage));
  } catch (const memscope::TraceFormatError& e) {
    return report(who, e.what(), code_for(run, kExitInput));
  } catch (const memscope::ReportFormatError& e) {
    return report(who, e.what(), code_for(run, kExitInput));
  } catch (const memscope::ReportWriteError& e) {
    return report(who, e.what(), code_for(run, kExitOutput));
  } catch (const std::exception& e) {
    return report(who, e.what(), code_for(run, kExitInternal));
  }
}
