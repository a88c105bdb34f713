// Starting the command of `memscope run`: fork, restore the signal mask the command should
// have, exec it with the PATH search of execvp, and tell the parent whether exec worked.
//
// Thread safety: call from a single-threaded process (fork). Errors: a failed fork throws
// std::system_error; a command that cannot be executed is reported in Spawned::exec_errno, with
// the child already reaped.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace memscope::cli {

struct Spawned {
  pid_t pid = -1;
  int exec_errno = 0;  // 0: the command runs; else why execvp failed (the child has been reaped)
};

// Runs `argv` (argv[0] searched on PATH) in a new child process with the signal mask
// `child_mask`. Descriptors without FD_CLOEXEC are inherited, the others closed at exec.
[[nodiscard]] Spawned spawn_command(const std::vector<std::string>& argv,
                                    const sigset_t& child_mask);

// The exit code and message of `memscope run` for a command that could not be executed:
// 127 when it was not found, 126 otherwise (as shells and env(1) do).
[[nodiscard]] int exec_failure_code(int exec_errno) noexcept;

}  // namespace memscope::cli
