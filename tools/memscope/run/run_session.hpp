// One `memscope run`: start the command with the marks pipe in its environment, watch its
// process tree every interval until the command exits, forward signals to it, reap what ends
// under us, and return what was seen.
//
// The runner makes itself a child subreaper (PR_SET_CHILD_SUBREAPER), so descendants orphaned
// by their parent stay in the tree and memscope reaps them (and gets their ru_maxrss).
// SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to memscope are passed to the
// command, except those the terminal sent to the whole foreground group (the command has them
// already). The run ends when the command itself exits; descendants still running then are
// recorded as running and left alone.
//
// Thread safety: call once per process, from its only thread (it blocks signals and forks).
// Errors: std::system_error when the pipe, signalfd or fork fails, or /proc cannot be read.
#pragma once

#include <string>
#include <vector>

#include "run/run_record.hpp"

namespace memscope::cli {

struct RunOptions {
  std::vector<std::string> command;  // argv; argv[0] is searched on PATH
  int interval_ms = 100;             // >= 1
  bool watch_gpu = true;
};

struct RunResult {
  int exit_code = 0;  // what memscope run exits with: the command's code, 128+N, 126, 127
  bool ran = false;   // false: the command could not be executed (record is empty)
  std::string error;  // why it could not be executed
  RunRecord record;
};

[[nodiscard]] RunResult run_and_watch(const RunOptions& options);

}  // namespace memscope::cli
