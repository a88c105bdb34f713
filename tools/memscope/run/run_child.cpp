#include "run/run_child.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "cli.hpp"

namespace memscope::cli {

Spawned spawn_command(const std::vector<std::string>& argv, const sigset_t& child_mask) {
  // Built before fork: the child may only call async-signal-safe functions.
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);

  // The child writes execvp's errno here; a successful exec closes it (O_CLOEXEC), so the
  // parent's read returns 0 bytes exactly when the command is running.
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    throw std::system_error(errno, std::generic_category(), "cannot create a pipe");
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int error = errno;
    ::close(report[0]);
    ::close(report[1]);
    throw std::system_error(error, std::generic_category(), "cannot fork");
  }
  if (pid == 0) {
    ::close(report[0]);
    ::pthread_sigmask(SIG_SETMASK, &child_mask, nullptr);
    ::execvp(args[0], args.data());
    const int error = errno;
    [[maybe_unused]] const ssize_t written = ::write(report[1], &error, sizeof error);
    ::_exit(exec_failure_code(error));
  }
  ::close(report[1]);
  Spawned spawned{pid, 0};
  int error = 0;
  ssize_t n = 0;
  do {
    n = ::read(report[0], &error, sizeof error);
  } while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n == static_cast<ssize_t>(sizeof error)) {
    spawned.exec_errno = error == 0 ? ENOEXEC : error;
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  return spawned;
}

int exec_failure_code(int exec_errno) noexcept {
  return exec_errno == ENOENT || exec_errno == ENOTDIR ? kExitNotFound : kExitNotExecutable;
}

}  // namespace memscope::cli
