// What every `memscope` subcommand shares: exit codes (docs/cli.md) and the two errors that
// choose them. A subcommand throws UsageFailure for an argument that is wrong and InputFailure
// for a file that is missing, unreadable or malformed; main() prints "memscope <sub>: <message>"
// on stderr and exits with the code. memscope::Error types from the library are mapped there
// too (ConfigError -> usage, TraceFormatError and ReportFormatError -> input,
// ReportWriteError -> output), so subcommands need not catch them.
#pragma once

#include <stdexcept>
#include <string>

namespace memscope::cli {

// Exit codes, the same for every subcommand (docs/cli.md). `memscope run` passes its child's
// own code through instead and uses 125-127 and 128+N for what went wrong around the child.
enum ExitCode : int {
  kExitOk = 0,
  kExitNegative = 1,  // the answer is "no": `replay --capacity` ran out of memory
  kExitUsage = 2,     // an argument is wrong (the message names it and what is allowed)
  kExitInput = 3,     // an input file is missing, unreadable or malformed
  kExitOutput = 4,    // an output file could not be written
  kExitInternal = 5,  // anything else: a bug or an environment memscope cannot work in
  // `memscope run` only, as env(1), timeout(1) and shells do:
  kExitRunFailed = 125,      // memscope itself failed around the child (usage, output, ...)
  kExitNotExecutable = 126,  // the command exists but could not be executed
  kExitNotFound = 127,       // the command was not found
  kExitSignalBase = 128,     // the child was killed by signal N: 128 + N
};

// An argument that is wrong: say which, what was given and what would be right.
class UsageFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An input file that is missing, unreadable or malformed: name the file.
class InputFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An output file that could not be written: name the file.
class OutputFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace memscope::cli
