// A child for test_run.py to run under `memscope run`: it allocates and touches known amounts,
// forks workers, orphans a grandchild, exits with a code, kills itself or traps SIGTERM, and
// writes stage marks, then reports what the kernel says about itself (VmHWM) in a file so the
// test can compare that with what memscope recorded.
//
//   run_child alloc MIB OUT            touch MIB MiB, free it, write "pid VmHWM" to OUT, exit 0
//   run_child workers BASE K DIR MS    fork K workers; worker i touches (i+1)*BASE MiB, holds it
//                                      MS ms, writes "pid VmHWM" to DIR/worker-<i>; exit 0
//   run_child orphan MIB OUT MS        a grandchild orphaned at once touches MIB MiB for MS ms
//                                      and writes "pid VmHWM" to OUT; we wait for OUT
//   run_child exit CODE                exit CODE
//   run_child kill SIGNAL              kill itself with SIGNAL
//   run_child trap CODE READY          on SIGTERM exit CODE; creates READY once the handler is set
//   run_child marks MIB OUT            stage "load" around touching MIB MiB (write_stage_mark),
//                                      plus one line that is not a mark; "pid VmHWM" to OUT
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "memscope/stage_marks.hpp"

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

long long own_hwm_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;
  }
  return -1;
}

void report(const std::string& path) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << ::getpid() << ' ' << own_hwm_bytes() << '\n';
  }
  std::rename(tmp.c_str(), path.c_str());  // the test never sees half a file
}

// Maps and touches `mib` MiB (every page resident), returns the mapping.
void* touch(std::size_t mib) {
  const std::size_t size = mib * kMiB;
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("mmap");
    std::exit(90);
  }
  std::memset(p, 1, size);
  return p;
}

void release(void* p, std::size_t mib) {
  ::munmap(p, mib * kMiB);
}

void sleep_ms(long ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

int alloc(std::size_t mib, const std::string& out) {
  void* p = touch(mib);
  release(p, mib);
  report(out);
  return 0;
}

int workers(std::size_t base, int count, const std::string& dir, long hold_ms) {
  for (int i = 0; i < count; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      const std::size_t mib = base * static_cast<std::size_t>(i + 1);
      void* p = touch(mib);
      sleep_ms(hold_ms);
      release(p, mib);
      report(dir + "/worker-" + std::to_string(i));
      sleep_ms(hold_ms);  // lives on after its peak, so memscope reads the final VmHWM
      ::_exit(0);
    }
  }
  int status = 0;
  int failed = 0;
  while (::wait(&status) > 0) {
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  return failed == 0 ? 0 : 1;
}

int orphan(std::size_t mib, const std::string& out, long hold_ms) {
  const pid_t middle = ::fork();
  if (middle == 0) {
    if (::fork() == 0) {  // the grandchild: its parent exits now, memscope adopts it
      sleep_ms(hold_ms);
      void* p = touch(mib);
      release(p, mib);
      report(out);
      ::_exit(0);
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(middle, &status, 0);
  // Stay until the grandchild has reported, so the run is still going when it exits.
  while (::access(out.c_str(), F_OK) != 0) sleep_ms(10);
  sleep_ms(hold_ms);
  return 0;
}

int trap(int code, const std::string& ready) {
  static int exit_code = 0;
  exit_code = code;
  struct sigaction action {};
  action.sa_handler = [](int) { ::_exit(exit_code); };
  ::sigaction(SIGTERM, &action, nullptr);
  std::ofstream(ready) << "ready\n";
  while (true) ::pause();
}

int marks(std::size_t mib, const std::string& out) {
  if (!memscope::stage_marks_enabled()) {
    std::fprintf(stderr, "run_child: MEMSCOPE_MARKS_FD is not set\n");
    return 91;
  }
  memscope::write_stage_mark("begin", "load");
  void* p = touch(mib);
  release(p, mib);
  memscope::write_stage_mark("end", "load",
                             {{"cpu_peaked_delta", static_cast<std::int64_t>(mib * kMiB)}});
  // A line that is not a mark: memscope counts and ignores it.
  const int fd = std::atoi(std::getenv("MEMSCOPE_MARKS_FD"));
  const char junk[] = "this is not a mark\n";
  [[maybe_unused]] const ssize_t n = ::write(fd, junk, sizeof junk - 1);
  report(out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  auto arg = [&](int i) { return i < argc ? std::string(argv[i]) : std::string(); };
  auto number = [&](int i) { return std::atol(arg(i).c_str()); };
  auto mib = [&](int i) { return static_cast<std::size_t>(number(i)); };
  if (mode == "alloc" && argc == 4) return alloc(mib(2), arg(3));
  if (mode == "workers" && argc == 6) {
    return workers(mib(2), static_cast<int>(number(3)), arg(4), number(5));
  }
  if (mode == "orphan" && argc == 5) return orphan(mib(2), arg(3), number(4));
  if (mode == "exit" && argc == 3) return static_cast<int>(number(2));
  if (mode == "kill" && argc == 3) {
    ::kill(::getpid(), static_cast<int>(number(2)));
    sleep_ms(10000);
    return 92;
  }
  if (mode == "trap" && argc == 4) return trap(static_cast<int>(number(2)), arg(3));
  if (mode == "marks" && argc == 4) return marks(mib(2), arg(3));
  std::fprintf(stderr, "run_child: bad arguments (see the comment at the top of run_child.cpp)\n");
  return 99;
}
