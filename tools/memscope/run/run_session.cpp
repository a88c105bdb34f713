#include "run/run_session.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <ctime>
#include <optional>
#include <system_error>

#include "memscope/process_tree.hpp"
#include "memscope/run_marks.hpp"
#include "memscope/run_watcher.hpp"
#include "memscope/units.hpp"
#include "progress.hpp"
#include "run/run_child.hpp"

namespace memscope::cli {
namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

std::int64_t monotonic_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

[[noreturn]] void fail(const char* what) {
  throw std::system_error(errno, std::generic_category(), what);
}

// Owns a descriptor for the length of the run.
struct Descriptor {
  int fd = -1;
  Descriptor() = default;
  explicit Descriptor(int value) noexcept : fd(value) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() noexcept {
    if (fd >= 0) ::close(fd);
  }
};

// The marks pipe: the read end non-blocking and ours alone; the write end inherited by the
// command (no FD_CLOEXEC) and non-blocking, so a writer never stalls when we fall behind. We
// keep the write end open for the whole run so MEMSCOPE_MARKS_PATH (/proc/<us>/fd/<n>) stays
// valid for processes that did not inherit it.
struct MarksPipe {
  Descriptor read_end;
  Descriptor write_end;
  MarksPipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) fail("cannot create the marks pipe");
    read_end.fd = fds[0];
    write_end.fd = fds[1];
    if (::fcntl(write_end.fd, F_SETFD, 0) != 0) fail("cannot make the marks pipe inheritable");
    const std::string fd = std::to_string(write_end.fd);
    const std::string path = fmt::format("/proc/{}/fd/{}", ::getpid(), write_end.fd);
    // Set in our own environment, which the command inherits; memscope run has one thread.
    ::setenv("MEMSCOPE_MARKS_FD", fd.c_str(), 1);      // NOLINT(concurrency-mt-unsafe)
    ::setenv("MEMSCOPE_MARKS_PATH", path.c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
  }
};

// Blocks the forwarded signals and SIGCHLD and reads them from a signalfd instead, so the
// loop sees them between samples; `original` is the mask the command gets back.
struct SignalWatch {
  sigset_t original{};
  Descriptor fd;
  SignalWatch() {
    sigset_t watched;
    sigemptyset(&watched);
    for (const int signal : kForwarded) sigaddset(&watched, signal);
    sigaddset(&watched, SIGCHLD);
    if (const int error = ::pthread_sigmask(SIG_BLOCK, &watched, &original); error != 0) {
      errno = error;
      fail("cannot block signals");
    }
    fd.fd = ::signalfd(-1, &watched, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd.fd < 0) fail("cannot create a signalfd");
  }
};

class Session {
 public:
  Session(const RunOptions& options, RunWatcher& watcher, pid_t child, std::int64_t start_ns,
          int marks_fd)
      : child_(child),
        interval_ns_(static_cast<std::int64_t>(options.interval_ms) * 1'000'000),
        watcher_(watcher),
        marks_(marks_fd, start_ns),
        progress_("memscope run"),
        marks_fd_(marks_fd),
        start_ns_(start_ns) {}

  // Runs until the command has exited; returns its wait status.
  int loop(int signal_fd) {
    std::int64_t next_sample = monotonic_ns();
    while (!child_status_) {
      std::int64_t now = monotonic_ns();
      if (now >= next_sample) {
        watcher_.sample(now);
        show_progress(now);
        next_sample += interval_ns_;
        if (next_sample <= now) next_sample = now + interval_ns_;  // we fell behind: skip
      }
      pollfd fds[2] = {{signal_fd, POLLIN, 0}, {marks_fd(), POLLIN, 0}};
      const auto wait_ms = static_cast<int>((next_sample - now + 999'999) / 1'000'000);
      if (::poll(fds, 2, wait_ms) < 0 && errno != EINTR) fail("poll failed");
      if ((fds[1].revents & POLLIN) != 0) read_marks();
      if ((fds[0].revents & POLLIN) != 0) read_signals(signal_fd);
      reap_ready();
    }
    read_marks();
    return *child_status_;
  }

  RunRecord finish(const std::vector<std::string>& command, double start_unix, int exit_code) {
    progress_.finish();
    reap_ready();  // orphans that ended with the command
    read_marks();
    if (marks_.malformed() > 0) {
      const std::size_t n = marks_.malformed();
      watcher_.add_note(n == 1 ? std::string("1 line on the marks pipe was not a stage mark and "
                                             "was ignored")
                               : fmt::format("{} lines on the marks pipe were not stage marks "
                                             "and were ignored",
                                             n));
    }
    RunRecord record = watcher_.finish(monotonic_ns(), command, start_unix, exit_code);
    if (WIFEXITED(*child_status_)) record.child_exit_code = WEXITSTATUS(*child_status_);
    if (WIFSIGNALED(*child_status_)) record.child_signal = WTERMSIG(*child_status_);
    return record;
  }

  void add_note(std::string note) { watcher_.add_note(std::move(note)); }

 private:
  [[nodiscard]] int marks_fd() const noexcept { return marks_fd_; }

  void read_marks() {
    std::vector<RunMark> marks;
    marks_.drain(marks);
    watcher_.add_marks(marks);
  }

  void read_signals(int signal_fd) const {
    signalfd_siginfo info{};
    while (::read(signal_fd, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
      const auto signal = static_cast<int>(info.ssi_signo);
      if (signal == SIGCHLD) continue;  // reap_ready() follows
      // The terminal sends Ctrl-C and friends to the whole foreground group: the command has
      // its own copy already.
      if (info.ssi_code == SI_KERNEL) continue;
      ::kill(child_, signal);
    }
  }

  // Reaps every child that has ended, reading who it was from its zombie first.
  void reap_ready() {
    while (true) {
      siginfo_t info{};
      if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0) return;  // ECHILD
      const pid_t pid = info.si_pid;
      if (pid == 0) return;
      const std::uint64_t start_ticks = read_start_ticks(pid).value_or(0);
      const std::string command = read_command_line(pid);
      const std::optional<bool> reaped_a_child = read_reaped_a_child(pid);
      int status = 0;
      rusage usage{};
      if (::wait4(pid, &status, 0, &usage) != pid) return;
      watcher_.reaped(pid, {start_ticks, command, reaped_a_child}, status, usage, monotonic_ns());
      if (pid == child_) child_status_ = status;
    }
  }

  void show_progress(std::int64_t now) {
    if (!progress_.enabled() || now - last_progress_ < 1'000'000'000) return;
    last_progress_ = now;
    const double elapsed = static_cast<double>(now - start_ns_) / 1e9;
    if (elapsed < 2.0) return;  // short commands: no flicker
    progress_.phase(fmt::format(
        "memscope run: {:.0f} s, {} process{}, tree RSS {}", elapsed, watcher_.processes_alive(),
        watcher_.processes_alive() == 1 ? "" : "es", format_bytes(watcher_.last_tree_rss())));
  }

  pid_t child_;
  std::int64_t interval_ns_;
  RunWatcher& watcher_;
  MarkReader marks_;
  Progress progress_;
  int marks_fd_;
  std::int64_t start_ns_;
  std::int64_t last_progress_ = 0;
  std::optional<int> child_status_;
};

}  // namespace

RunResult run_and_watch(const RunOptions& options) {
  RunResult result;
  MarksPipe marks;
  SignalWatch signals;
  std::optional<std::string> subreaper_note;
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    subreaper_note = std::string("not a child subreaper (") +
                     std::generic_category().message(errno) +
                     "): orphaned descendants left the tree";
  }
  RunWatcher watcher(::getpid(), options.interval_ms / 1000.0, options.watch_gpu);
  const auto start_unix =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const std::int64_t start_ns = monotonic_ns();
  const Spawned spawned = spawn_command(options.command, signals.original);
  if (spawned.exec_errno != 0) {
    result.exit_code = exec_failure_code(spawned.exec_errno);
    result.error = fmt::format("cannot run '{}': {}{}", options.command.front(),
                               std::generic_category().message(spawned.exec_errno),
                               result.exit_code == 127 ? " (not found on PATH)" : "");
    return result;
  }
  watcher.set_start(start_ns);
  Session session(options, watcher, spawned.pid, start_ns, marks.read_end.fd);
  if (subreaper_note) session.add_note(*subreaper_note);
  const int status = session.loop(signals.fd.fd);
  result.ran = true;
  result.exit_code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  result.record = session.finish(options.command, start_unix, result.exit_code);
  return result;
}

}  // namespace memscope::cli
