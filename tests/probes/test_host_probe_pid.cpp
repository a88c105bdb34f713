// HostProbe on another process: a forked child maps memory on command while the parent
// measures it through /proc/<pid>, then exits so the parent sees a clear error.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "host_probe_test_util.hpp"
#include "mapped_buffer.hpp"
#include "memscope/errors.hpp"
#include "memscope/host_probe.hpp"

namespace memscope {
namespace {

// A child process that obeys one-byte commands: 'k' maps and keeps 256 MiB, 's' maps 512 MiB,
// holds it 30 ms and unmaps it, 'q' exits. Each command is acknowledged with one byte.
class Child {
 public:
  Child() {
    int to_child[2];
    int to_parent[2];
    if (pipe(to_child) != 0 || pipe(to_parent) != 0) throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ == 0) {
      close(to_child[1]);
      close(to_parent[0]);
      serve(to_child[0], to_parent[1]);
    }
    close(to_child[0]);
    close(to_parent[1]);
    out_ = to_child[1];
    in_ = to_parent[0];
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(out_);
    close(in_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  [[nodiscard]] int pid() const { return pid_; }
  void command(char c) {
    char ack = 0;
    ASSERT_EQ(write(out_, &c, 1), 1);
    ASSERT_EQ(read(in_, &ack, 1), 1);
  }
  void quit() {
    char c = 'q';
    ASSERT_EQ(write(out_, &c, 1), 1);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  [[noreturn]] static void serve(int in, int out) {
    testing::MappedBuffer* kept = nullptr;
    char c = 0;
    while (read(in, &c, 1) == 1 && c != 'q') {
      if (c == 'k') kept = new testing::MappedBuffer(256 * MiB);
      if (c == 's') {
        testing::MappedBuffer spike(512 * MiB);
        usleep(30000);
      }
      if (write(out, &c, 1) != 1) break;
    }
    delete kept;
    _exit(0);
  }

  pid_t pid_ = -1;
  int out_ = -1;
  int in_ = -1;
};

void measure_child(bool force_sampling, double tolerance_mib) {
  Child child;
  HostProbe probe(HostProbeOptions{.pid = child.pid(), .force_sampling = force_sampling});
  EXPECT_EQ(probe.pid(), child.pid());
  HostProbe::Window w = probe.open_window();
  child.command('k');
  child.command('s');
  HostProbe::Window::Reading r = w.close();
  EXPECT_MIB_NEAR(r.current - w.begin(), 256, tolerance_mib);
  EXPECT_MIB_NEAR(r.peak - r.current, 512, tolerance_mib);
  EXPECT_MIB_NEAR(probe.read().rss - w.begin(), 256, tolerance_mib);

  child.quit();
  EXPECT_THROW((void)probe.current_rss(), BackendError);
  EXPECT_THROW((void)probe.open_window(), BackendError);
}

TEST(HostProbePid, MeasuresAChildProcess) {
  {
    HostProbe self;
    if (self.mode() != HostPeakMode::kernel_hwm) GTEST_SKIP() << self.fallback_reason();
  }
  measure_child(false, 8);
}

TEST(HostProbePid, MeasuresAChildProcessBySampling) {
  measure_child(true, 16);
}

TEST(HostProbePid, ReadsAnotherProcess) {
  Child child;
  HostMemory m = read_host_memory(child.pid());
  EXPECT_GT(m.rss, 0);
  EXPECT_GE(m.hwm, m.rss);
}

}  // namespace
}  // namespace memscope
