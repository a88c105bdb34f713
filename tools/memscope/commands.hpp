// The subcommands of `memscope`. Each add_*_command() registers its CLI11 subcommand with its
// options on `app` and sets `action` to the function that runs it after parsing; the action
// returns the exit code (cli.hpp) or throws UsageFailure / InputFailure / OutputFailure.
#pragma once

#include <functional>

namespace CLI {
class App;
}

namespace memscope::cli {

using Action = std::function<int()>;

void add_info_command(CLI::App& app, Action& action);    // cmd_info.cpp
void add_run_command(CLI::App& app, Action& action);     // cmd_run.cpp
void add_replay_command(CLI::App& app, Action& action);  // cmd_replay.cpp
void add_report_command(CLI::App& app, Action& action);  // cmd_report.cpp
void add_diff_command(CLI::App& app, Action& action);    // cmd_diff.cpp
// cmd_estimate.cpp: execs `python3 -m memscope._estimate_command` (the capture needs PyTorch).
void add_estimate_command(CLI::App& app, Action& action);

}  // namespace memscope::cli
