// The /proc parsers against fixed text (so a parsing bug cannot hide behind a live reading) and
// against the live files of this process.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "mapped_buffer.hpp"
#include "memscope/host_probe.hpp"
#include "memscope/units.hpp"
#include "probes/proc_files.hpp"

namespace memscope::detail {
namespace {

constexpr const char* kStatus =
    "Name:\tpython3\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\n"
    "VmPeak:\t 9000000 kB\nVmSize:\t 8000000 kB\nVmLck:\t       0 kB\nVmPin:\t       0 kB\n"
    "VmHWM:\t 3145728 kB\nVmRSS:\t 2097152 kB\nRssAnon:\t 2000000 kB\nRssFile:\t   97000 kB\n"
    "RssShmem:\t     152 kB\nVmData:\t 7000000 kB\nThreads:\t12\n";

TEST(ProcFiles, ParsesStatusFields) {
  HostMemory m;
  ASSERT_TRUE(parse_status(kStatus, std::strlen(kStatus), m));
  EXPECT_EQ(m.hwm, 3 * static_cast<std::int64_t>(GiB));
  EXPECT_EQ(m.rss, 2 * static_cast<std::int64_t>(GiB));
  EXPECT_EQ(m.rss_anon, 2000000LL * 1024);
  EXPECT_EQ(m.rss_file, 97000LL * 1024);
  EXPECT_EQ(m.rss_shmem, 152LL * 1024);
}

TEST(ProcFiles, RejectsStatusWithoutMemoryFields) {
  // A zombie or a kernel thread: no Vm* lines at all.
  const char* zombie = "Name:\tdefunct\nState:\tZ (zombie)\nThreads:\t1\n";
  HostMemory m;
  EXPECT_FALSE(parse_status(zombie, std::strlen(zombie), m));
  // "VmRSSX" and a missing number must not be taken for VmRSS.
  const char* odd = "VmHWM:\t 10 kB\nVmRSS:\t kB\n";
  EXPECT_FALSE(parse_status(odd, std::strlen(odd), m));
}

TEST(ProcFiles, ParsesStatm) {
  const char* statm = "123456 2048 300 10 0 5000 0\n";
  std::int64_t rss = 0;
  ASSERT_TRUE(parse_statm(statm, std::strlen(statm), rss));
  EXPECT_EQ(rss, 2048 * sysconf(_SC_PAGESIZE));
  EXPECT_FALSE(parse_statm("123456", 6, rss));
}

TEST(ProcFiles, LiveStatusIsConsistent) {
  HostMemory m = read_host_memory();
  EXPECT_GT(m.rss, 0);
  EXPECT_GE(m.hwm, m.rss);
  // The kernel prints VmRSS as the sum of the three parts it read.
  EXPECT_EQ(m.rss, m.rss_anon + m.rss_file + m.rss_shmem);
}

TEST(ProcFiles, StatmAndStatusAgreeAndSeeNewMemory) {
  Fd statm = open_proc(0, "statm", O_RDONLY);
  ASSERT_TRUE(statm.valid());
  std::int64_t before = 0;
  ASSERT_TRUE(read_statm(statm.get(), before));
  testing::MappedBuffer buffer(64 * MiB);
  std::int64_t after = 0;
  ASSERT_TRUE(read_statm(statm.get(), after));  // the same fd, read again: fresh numbers
  EXPECT_NEAR(static_cast<double>(after - before), 64.0 * MiB, 2.0 * MiB);
  EXPECT_NEAR(static_cast<double>(read_host_memory().rss), static_cast<double>(after), 1.0 * MiB);
}

TEST(ProcFiles, MaxrssBoundsTheHighWaterMark) {
  HostMemory m = read_host_memory();
  // Both come from the kernel's per-CPU counters, which may lag each other by a few pages.
  EXPECT_GE(self_maxrss_bound(), m.hwm - static_cast<std::int64_t>(MiB));
}

// What a program started by fork and execve from this process, which holds 256 MiB, reports
// (peak_rss_child.cpp, with `mode` "" or "reset"): process_peak_rss(), VmHWM, ru_maxrss, and the
// probe's mode.
struct ChildFigures {
  std::int64_t peak = 0;
  std::int64_t hwm = 0;
  std::int64_t maxrss = 0;
  std::string probe;
};

ChildFigures exec_child_of_a_large_process(const std::string& mode) {
  const testing::MappedBuffer large(256 * MiB);
  const std::string out =
      ::testing::TempDir() + "memscope_peak_rss_child_" + std::to_string(::getpid()) + ".txt";
  std::remove(out.c_str());
  std::string child = MEMSCOPE_PEAK_RSS_CHILD;
  std::string mode_arg = mode;
  std::string out_arg = out;
  char* const with_mode[] = {child.data(), mode_arg.data(), out_arg.data(), nullptr};
  char* const without[] = {child.data(), out_arg.data(), nullptr};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execv(child.c_str(), mode.empty() ? without : with_mode);
    ::_exit(127);
  }
  ChildFigures f;
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    ADD_FAILURE() << "the child failed, status " << status;
    return f;
  }
  std::ifstream in(out);
  in >> f.peak >> f.hwm >> f.maxrss >> f.probe;
  std::remove(out.c_str());
  return f;
}

// Linux keeps ru_maxrss across execve, so a program started by fork and exec from a large
// process reads that process's size as its own peak before it has touched anything. Its peak
// (process_peak_rss(), which stage marks report) must be what it reached itself: was 256 MiB
// and more here, from the parent's buffer.
TEST(ProcFiles, AProgramExecedByALargeProcessDoesNotReportItsSize) {
  const ChildFigures f = exec_child_of_a_large_process("");
  if (f.maxrss < static_cast<std::int64_t>(256 * MiB)) {
    GTEST_SKIP() << "this kernel does not carry ru_maxrss across execve (the child read "
                 << f.maxrss << " bytes), so there is nothing to keep out";
  }
  EXPECT_GT(f.hwm, 0);
  EXPECT_LE(f.peak, f.hwm + static_cast<std::int64_t>(2 * MiB)) << "ru_maxrss " << f.maxrss;
  EXPECT_LT(f.peak, static_cast<std::int64_t>(256 * MiB));
}

// ...and while the inherited mark hides its own, the peak it reached before a probe reset VmHWM
// (clear_refs) still counts: the 32 MiB it touched and freed first.
TEST(ProcFiles, UnderAnInheritedMarkAResetKeepsThePeakItErases) {
  const ChildFigures f = exec_child_of_a_large_process("reset");
  if (f.maxrss < static_cast<std::int64_t>(256 * MiB)) {
    GTEST_SKIP() << "this kernel does not carry ru_maxrss across execve";
  }
  if (f.probe != "kernel-hwm") GTEST_SKIP() << "no reset here: the probe is " << f.probe;
  EXPECT_LT(f.hwm, static_cast<std::int64_t>(32 * MiB)) << "clear_refs lowered VmHWM";
  EXPECT_GE(f.peak, static_cast<std::int64_t>(32 * MiB));
  EXPECT_LT(f.peak, static_cast<std::int64_t>(256 * MiB));
}

}  // namespace
}  // namespace memscope::detail
