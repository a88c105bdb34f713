// The watcher of `memscope run` (include/memscope/run_watcher.hpp) on real forked children:
// its choice of a reaped child's peak (wait4 against sampled VmHWM, a parent's wait4 figure
// that holds its children's), a peak before an exec, and a command line read again. It reads
// them through the process tree (include/memscope/process_tree.hpp). The command itself is
// tested end to end in tests/cli/test_run.py.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/system_memory.hpp"
#include "memscope/process_tree.hpp"
#include "memscope/run_watcher.hpp"
#include "probes/proc_files.hpp"

namespace memscope {
namespace {

// A child of this test that touches `bytes` and waits for a byte on a pipe before it exits; the
// watcher samples its VmHWM while it waits. Returns the watcher's record after it was reaped with
// its real rusage, ru_maxrss lowered by `lower_by` bytes to stand for the kernel counters' drift.
RunProcess reaped_child_peak(std::int64_t bytes, std::int64_t lower_by, std::int64_t* sampled) {
  int go[2];
  int ready[2];
  EXPECT_EQ(::pipe(go), 0);
  EXPECT_EQ(::pipe(ready), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    // volatile: the compiler may not drop the stores to memory nobody reads.
    volatile char* touched = static_cast<char*>(std::malloc(static_cast<std::size_t>(bytes)));
    for (std::int64_t i = 0; touched != nullptr && i < bytes; i += 4096) touched[i] = 1;
    char byte = 0;
    (void)!::write(ready[1], &byte, 1);
    (void)!::read(go[0], &byte, 1);
    ::_exit(touched == nullptr ? 1 : 0);
  }
  char byte = 0;
  EXPECT_EQ(::read(ready[0], &byte, 1), 1);
  RunWatcher watcher(static_cast<int>(::getpid()), 0.05, /*watch_gpu=*/false);
  watcher.set_start(0);
  watcher.sample(1'000'000);
  EXPECT_EQ(::write(go[1], &byte, 1), 1);
  siginfo_t info{};
  EXPECT_EQ(::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT), 0);
  const std::optional<bool> reaped_a_child = read_reaped_a_child(static_cast<int>(pid));
  EXPECT_EQ(reaped_a_child, std::optional<bool>(false));  // it forked nothing
  int status = 0;
  rusage usage{};
  EXPECT_EQ(::wait4(pid, &status, 0, &usage), pid);
  usage.ru_maxrss -= lower_by / 1024;
  watcher.reaped(static_cast<int>(pid),
                 {.start_ticks = 0, .command = "", .reaped_a_child = reaped_a_child}, status, usage,
                 2'000'000);
  for (int fd : {go[0], go[1], ready[0], ready[1]}) ::close(fd);
  const RunRecord record = watcher.finish(3'000'000, {"child"}, 0.0, 0);
  for (const RunProcess& process : record.processes) {
    if (process.pid != pid) continue;
    *sampled = process.t.empty() ? -1 : process.peak_rss;
    return process;
  }
  ADD_FAILURE() << "the child " << pid << " is not in the record";
  return {};
}

// Regression (CI's ASan step): a VmHWM sampled a few pages above the reaped child's ru_maxrss
// (per-CPU RSS counter drift) made the record call the peak "sampled" although wait4's final
// figure was there.
TEST(RunWatcherPeaks, WaitFourStandsAgainstAnEarlierReadingWithinTheCountersDrift) {
  std::int64_t sampled = -1;
  const RunProcess child =
      reaped_child_peak(std::int64_t{16} << 20, std::int64_t{4} * 4096, &sampled);
  EXPECT_EQ(child.peak_rss_source, "wait4");
  EXPECT_GT(child.peak_rss, std::int64_t{16} << 20);
  EXPECT_EQ(child.exit_code, 0);
}

// Beyond the drift an earlier reading is a real, higher peak and wins, and says it was sampled.
TEST(RunWatcherPeaks, AHigherReadingBeyondTheDriftWins) {
  std::int64_t sampled = -1;
  const std::int64_t lower = 2 * detail::rss_counter_slack(1) + (std::int64_t{8} << 20);
  const RunProcess child = reaped_child_peak(std::int64_t{16} << 20, lower, &sampled);
  EXPECT_EQ(child.peak_rss_source, "sampled");
  EXPECT_GT(child.peak_rss, std::int64_t{16} << 20);
}

// Two pipes between a test and the child it forks: the child says it is ready and waits; the
// test goes on when it is, and lets the child go.
class Handshake {
 public:
  Handshake() {
    if (::pipe(ready_) != 0 || ::pipe(go_) != 0) throw std::runtime_error("pipe failed");
  }
  Handshake(const Handshake&) = delete;
  Handshake& operator=(const Handshake&) = delete;
  ~Handshake() {
    for (const int fd : {ready_[0], ready_[1], go_[0], go_[1]}) ::close(fd);
  }
  // In the child.
  void ready_then_wait() const {
    char byte = 0;
    (void)!::write(ready_[1], &byte, 1);
    (void)!::read(go_[0], &byte, 1);
  }
  // In the test.
  [[nodiscard]] bool wait_ready() const {
    char byte = 0;
    return ::read(ready_[0], &byte, 1) == 1;
  }
  [[nodiscard]] bool go() const {
    const char byte = 0;
    return ::write(go_[1], &byte, 1) == 1;
  }

 private:
  int ready_[2] = {-1, -1};
  int go_[2] = {-1, -1};
};

// A child of this test that forks a grandchild touching `bytes`, reaps it, and waits on the
// handshake; the watcher samples the child (or not), then reaps it as `memscope run` does.
struct ReapedParent {
  RunProcess process;
  std::int64_t wait4_maxrss = -1;
  std::optional<bool> reaped_a_child;
};
ReapedParent reaped_parent_of_a_fat_child(std::int64_t bytes, bool sample_it) {
  const Handshake handshake;
  const pid_t pid = ::fork();
  if (pid == 0) {
    const pid_t grandchild = ::fork();
    if (grandchild == 0) {
      volatile char* touched = static_cast<char*>(std::malloc(static_cast<std::size_t>(bytes)));
      for (std::int64_t i = 0; touched != nullptr && i < bytes; i += 4096) touched[i] = 1;
      ::_exit(touched == nullptr ? 1 : 0);
    }
    int status = 0;
    ::waitpid(grandchild, &status, 0);
    handshake.ready_then_wait();
    ::_exit(0);
  }
  ReapedParent out;
  EXPECT_TRUE(handshake.wait_ready());
  RunWatcher watcher(static_cast<int>(::getpid()), 0.05, /*watch_gpu=*/false);
  watcher.set_start(0);
  if (sample_it) watcher.sample(1'000'000);
  EXPECT_TRUE(handshake.go());
  siginfo_t info{};
  EXPECT_EQ(::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT), 0);
  RunWatcher::Zombie zombie{read_start_ticks(static_cast<int>(pid)).value_or(0), "parent",
                            read_reaped_a_child(static_cast<int>(pid))};
  out.reaped_a_child = zombie.reaped_a_child;
  int status = 0;
  rusage usage{};
  EXPECT_EQ(::wait4(pid, &status, 0, &usage), pid);
  out.wait4_maxrss = static_cast<std::int64_t>(usage.ru_maxrss) * 1024;
  watcher.reaped(static_cast<int>(pid), zombie, status, usage, 2'000'000);
  const RunRecord record = watcher.finish(3'000'000, {"parent"}, 0.0, 0);
  for (const RunProcess& process : record.processes) {
    if (process.pid == pid) out.process = process;
  }
  return out;
}

// Regression (issue 27): `sh -c 'sort ... | wc -c'` listed sh at sort's 127 MiB as "wait4", the
// exact figure, when sort lived between two samples: wait4's ru_maxrss holds the peaks of the
// children a process reaped. Such a process gets its own sampled VmHWM.
TEST(RunWatcherPeaks, AParentsWaitFourFigureIsNotTakenForItsOwn) {
  constexpr std::int64_t kFat = std::int64_t{64} << 20;
  const ReapedParent parent = reaped_parent_of_a_fat_child(kFat, /*sample_it=*/true);
  EXPECT_EQ(parent.reaped_a_child, std::optional<bool>(true));  // the zombie's cminflt says so
  EXPECT_GE(parent.wait4_maxrss, kFat);                         // the grandchild's peak
  EXPECT_EQ(parent.process.peak_rss_source, "sampled");
  EXPECT_LT(parent.process.peak_rss, parent.wait4_maxrss - kFat / 2);
}

// Never sampled, the parent has only wait4's figure, and says what it is.
TEST(RunWatcherPeaks, AnUnsampledParentsWaitFourFigureIsLabelledForWhatItIs) {
  constexpr std::int64_t kFat = std::int64_t{64} << 20;
  const ReapedParent parent = reaped_parent_of_a_fat_child(kFat, /*sample_it=*/false);
  EXPECT_EQ(parent.process.peak_rss_source, kWait4OrChild);
  EXPECT_EQ(parent.process.peak_rss, parent.wait4_maxrss);
}

// Regression (CI, torchrun under load): a sample taken between a launcher's fork and its exec
// saw the child with the launcher's pages (550 MB of torch) and the record gave that peak to the
// 280 MB rank the child became. A new program's peak starts at its exec, also when its name does
// not change (python starting python): here the child keeps this test's name.
TEST(RunWatcherPeaks, APeakBeforeTheExecIsNotTheNewPrograms) {
  constexpr std::int64_t kFat = std::int64_t{96} << 20;
  // The parent is fat, so the forked child is too until it execs.
  const std::unique_ptr<char[]> fat_pages(new char[static_cast<std::size_t>(kFat)]);
  volatile char* fat = fat_pages.get();
  for (std::int64_t i = 0; i < kFat; i += 4096) fat[i] = 1;
  // sleep(1), under a link with this process's own name: the exec changes no name.
  const std::optional<std::string> comm =
      memscope::detail::read_proc_file(static_cast<int>(::getpid()), "comm");
  ASSERT_TRUE(comm.has_value());
  const std::string name = comm->substr(0, comm->find('\n'));
  char dir_template[] = "/tmp/memscope-exec-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string link = std::string(dir_template) + "/" + name;
  ASSERT_EQ(::symlink("/bin/sleep", link.c_str()), 0);
  const Handshake handshake;
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    handshake.ready_then_wait();
    ::execl(link.c_str(), link.c_str(), "5", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  EXPECT_TRUE(handshake.wait_ready());
  RunWatcher watcher(static_cast<int>(::getpid()), 0.05, /*watch_gpu=*/false);
  watcher.set_start(0);
  watcher.sample(1'000'000);  // before the exec: the child holds the parent's pages
  EXPECT_TRUE(handshake.go());
  // Wait (bounded) until the child runs sleep: its VmHWM restarts small, and its arguments are
  // in place (inside the exec the new image has none yet: CI's TSan run sampled it there).
  std::int64_t hwm = -1;
  bool has_arguments = false;
  for (int i = 0; i < 500; ++i) {
    const std::optional<TreeProcess> p = read_process(static_cast<int>(pid));
    hwm = p ? p->hwm : -1;
    has_arguments =
        read_arguments(static_cast<int>(pid)).value_or("").find(" 5") != std::string::npos;
    if (hwm >= 0 && hwm < kFat / 2 && has_arguments) break;
    ::usleep(10'000);
  }
  ASSERT_GE(hwm, 0);
  ASSERT_LT(hwm, kFat / 2) << "the child did not exec within 5 s";
  ASSERT_TRUE(has_arguments) << "the child's arguments did not show within 5 s";
  watcher.sample(2'000'000);  // after it
  ::kill(pid, SIGKILL);
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);  // not reaped by the watcher: no wait4 figure
  ::unlink(link.c_str());
  ::rmdir(dir_template);
  const RunRecord record = watcher.finish(3'000'000, {"child"}, 0.0, 0);
  bool found = false;
  for (const RunProcess& process : record.processes) {
    if (process.pid != pid) continue;
    found = true;
    ASSERT_EQ(process.rss.size(), 2U);
    EXPECT_GE(process.rss[0], kFat / 2);  // the fork was sampled, with the parent's pages
    EXPECT_LT(process.peak_rss, kFat / 2) << process.peak_rss_source;
    EXPECT_NE(process.command.find(name + " 5"), std::string::npos) << process.command;
  }
  EXPECT_TRUE(found) << "the child " << pid << " is not in the record";
}

// Regression (CI, TSan): a sample inside an exec, after the new image but before its arguments,
// read an empty command line, and the process kept "[name]" as its command for good. A command
// line read empty is read again at the next sample. Here the child empties its own arguments
// and then writes new ones, as setproctitle does.
TEST(RunWatcherCommands, AnEmptyCommandLineIsReadAgainAtTheNextSample) {
  const Handshake handshake;
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Where this process's arguments live: /proc/self/stat field 48, and cmdline's length.
    const std::optional<TreeProcess> self = read_process(static_cast<int>(::getpid()));
    const std::optional<std::string> arguments =
        memscope::detail::read_proc_file(static_cast<int>(::getpid()), "cmdline");
    if (!self || self->image == 0 || !arguments || arguments->size() < 8) ::_exit(2);
    // NOLINTNEXTLINE(performance-no-int-to-ptr): the kernel gives the address as a number
    char* area = reinterpret_cast<char*>(self->image);
    std::memset(area, 0, arguments->size());
    handshake.ready_then_wait();
    std::memcpy(area, "renamed", sizeof "renamed");  // the area is long enough: checked above
    handshake.ready_then_wait();
    ::_exit(0);
  }
  // A failed assertion leaves the test with the child waiting: end it.
  struct KillOnReturn {
    pid_t pid;
    ~KillOnReturn() {
      if (pid > 0 && ::kill(pid, SIGKILL) == 0) ::waitpid(pid, nullptr, 0);
    }
  } killer{pid};
  RunWatcher watcher(static_cast<int>(::getpid()), 0.05, /*watch_gpu=*/false);
  watcher.set_start(0);
  ASSERT_TRUE(handshake.wait_ready());
  EXPECT_EQ(read_arguments(static_cast<int>(pid)), std::nullopt);
  watcher.sample(1'000'000);  // its command line is empty
  EXPECT_TRUE(handshake.go());
  ASSERT_TRUE(handshake.wait_ready());
  watcher.sample(2'000'000);  // now it has one
  EXPECT_TRUE(handshake.go());
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  killer.pid = 0;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const RunRecord record = watcher.finish(3'000'000, {"child"}, 0.0, 0);
  bool found = false;
  for (const RunProcess& process : record.processes) {
    if (process.pid != pid) continue;
    found = true;
    EXPECT_EQ(process.command, "renamed");
  }
  EXPECT_TRUE(found) << "the child " << pid << " is not in the record";
}

}  // namespace
}  // namespace memscope
