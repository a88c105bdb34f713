// The ranks of a distributed job under `memscope run`: a real exec'd child's environment read
// back from /proc by the watcher, and the grouping of a record's processes into ranks
// (include/memscope/run_ranks.hpp). The launchers themselves (torchrun, mpirun) are run in
// tests/cli/test_run_ranks.py and test_run_distributed.py.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "memscope/rank_env.hpp"
#include "memscope/run_ranks.hpp"
#include "memscope/run_watcher.hpp"
#include "watched_job.hpp"

namespace memscope {
namespace {

using testing::job;
using testing::MiB;
using testing::process;

// A real process exec'd with rank variables: /proc/<pid>/environ gives them back, and the
// watcher makes it rank 2 of the record. The pipe closes on exec, so the read below returns
// once the child runs with its new environment.
TEST(RankEnv, ReadsARealChildsEnvironment) {
  int exec_done[2];
  ASSERT_EQ(::pipe2(exec_done, O_CLOEXEC), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    char sleep_path[] = "/bin/sleep";
    char seconds[] = "600";
    char* argv[] = {sleep_path, seconds, nullptr};
    char rank[] = "RANK=2";
    char local[] = "LOCAL_RANK=0";
    char world[] = "WORLD_SIZE=4";
    char* envp[] = {rank, local, world, nullptr};
    ::execve(sleep_path, argv, envp);
    ::_exit(127);
  }
  ::close(exec_done[1]);
  char byte = 0;
  EXPECT_EQ(::read(exec_done[0], &byte, 1), 0);  // EOF: exec'd
  ::close(exec_done[0]);

  const RankEnv env = read_rank_env(static_cast<int>(pid));
  EXPECT_EQ(env.rank, 2);
  EXPECT_EQ(env.local_rank, 0);
  EXPECT_EQ(env.world_size, 4);

  RunWatcher watcher(static_cast<int>(::getpid()), 0.05, /*watch_gpu=*/false);
  watcher.set_start(0);
  watcher.sample(1'000'000);
  ::kill(pid, SIGKILL);
  int status = 0;
  rusage usage{};
  EXPECT_EQ(::wait4(pid, &status, 0, &usage), pid);
  watcher.reaped(static_cast<int>(pid), {.start_ticks = 0, .command = "", .reaped_a_child = false},
                 status, usage, 2'000'000);
  const RunRecord record = watcher.finish(3'000'000, {"sleep"}, 0.0, 0);
  ASSERT_EQ(record.ranks.size(), 1U);
  const RunRank& r = record.ranks.front();
  EXPECT_EQ(r.rank, 2);
  EXPECT_EQ(r.pid, pid);
  EXPECT_EQ(r.local_rank, 0);
  EXPECT_EQ(r.world_size, 4);
  EXPECT_EQ(r.exit_signal, SIGKILL);
  EXPECT_GT(r.peak_rss, 0);

  EXPECT_FALSE(read_rank_env(static_cast<int>(pid)).rank);  // reaped: gone
}

TEST(RunRanks, OneLinePerRankSortedWithItsChildren) {
  const std::vector<RunRank> ranks = group_ranks(job());
  ASSERT_EQ(ranks.size(), 3U);  // the launcher has no line
  EXPECT_EQ(ranks[0].rank, 0);
  EXPECT_EQ(ranks[1].rank, 1);
  EXPECT_EQ(ranks[2].rank, 3);

  // One process: its own exact peak.
  EXPECT_EQ(ranks[0].pid, 12);
  EXPECT_EQ(ranks[0].peak_rss, 200 * MiB);
  EXPECT_EQ(ranks[0].peak_rss_source, "VmHWM");
  EXPECT_EQ(ranks[0].pids, std::vector<int>{12});

  // Rank 1: its own process (11) and its worker (20). The highest sample of their sum
  // (90 + 40 = 130 MiB) is above its own peak (100 MiB), so the rank's peak is that sample.
  const RunRank& one = ranks[1];
  EXPECT_EQ(one.pid, 11);
  EXPECT_EQ(one.pids, (std::vector<int>{11, 20}));
  EXPECT_EQ(one.own_peak_rss, 100 * MiB);
  EXPECT_EQ(one.sampled_peak_rss, 130 * MiB);
  EXPECT_EQ(one.peak_rss, 130 * MiB);
  EXPECT_EQ(one.peak_rss_source, "sampled sum");
  EXPECT_EQ(one.sum_of_peaks, 150 * MiB);
  EXPECT_EQ(one.local_rank, 1);
  EXPECT_EQ(one.world_size, 4);

  // Stages by pid, each name once, in order of begin.
  EXPECT_EQ(ranks[2].stages, (std::vector<std::string>{"train", "eval"}));
  EXPECT_TRUE(ranks[0].stages.empty());

  const RankSpread spread = rank_spread(ranks, &RunRank::peak_rss);
  ASSERT_NE(spread.max, nullptr);
  EXPECT_EQ(spread.max->rank, 3);
  EXPECT_EQ(spread.min->rank, 1);
  EXPECT_EQ(spread.known, 3U);
  EXPECT_EQ(spread.mean, (200 + 130 + 400) * MiB / 3);
}

// A worker whose own peak is above the sampled sum: the rank keeps its own process's peak
// when that is larger.
TEST(RunRanks, OwnPeakStandsWhenSamplesMissedIt) {
  RunRecord record;
  record.processes.push_back(process(11, 10, 300 * MiB, 0, {10 * MiB}));
  record.processes.push_back(process(20, 11, 50 * MiB, 0, {10 * MiB}));
  const std::vector<RunRank> ranks = group_ranks(record);
  ASSERT_EQ(ranks.size(), 1U);
  EXPECT_EQ(ranks[0].peak_rss, 300 * MiB);
  EXPECT_EQ(ranks[0].peak_rss_source, "VmHWM");
  EXPECT_EQ(ranks[0].sampled_peak_rss, 20 * MiB);
}

// Ties: the lowest rank holds the max; a rank with no known peak is left out of the spread.
TEST(RunRanks, TiesGoToTheLowestRank) {
  RunRecord record;
  record.processes.push_back(process(12, 1, 64 * MiB, 2));
  record.processes.push_back(process(11, 1, 64 * MiB, 1));
  record.processes.push_back(process(13, 1, -1, 0));
  const std::vector<RunRank> ranks = group_ranks(record);
  const RankSpread spread = rank_spread(ranks, &RunRank::peak_rss);
  EXPECT_EQ(spread.max->rank, 1);
  EXPECT_EQ(spread.min->rank, 1);
  EXPECT_EQ(spread.known, 2U);
  EXPECT_EQ(rank_spread({}, &RunRank::peak_rss).max, nullptr);
}

}  // namespace
}  // namespace memscope
