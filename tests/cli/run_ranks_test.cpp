// Ranks of a distributed job under `memscope run`: the rank variables of an environ block
// (rank_env.hpp), a real exec'd child's environment read back from /proc, the grouping of a
// record's processes into ranks (run_ranks.hpp), and the ranks' JSON and summary. The launchers
// themselves (torchrun, mpirun) are run in test_run_ranks.py and test_run_distributed.py.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "run/rank_env.hpp"
#include "run/run_ranks.hpp"
#include "run/run_record.hpp"
#include "run/run_summary.hpp"
#include "run/run_watch.hpp"

namespace memscope::cli {
namespace {

using namespace std::string_literals;

constexpr std::int64_t MiB = std::int64_t{1} << 20;

TEST(RankEnv, TorchrunsVariables) {
  const std::string block =
      "PATH=/usr/bin\0RANK=5\0LOCAL_RANK=1\0WORLD_SIZE=8\0LOCAL_WORLD_SIZE=4\0"s;
  const RankEnv env = parse_rank_env(block);
  EXPECT_EQ(env.rank, 5);
  EXPECT_EQ(env.rank_variable, "RANK");
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.world_size, 8);
  EXPECT_EQ(env.local_world_size, 4);
}

TEST(RankEnv, OpenMpiAndPmiVariables) {
  const RankEnv ompi = parse_rank_env(
      "OMPI_COMM_WORLD_SIZE=4\0OMPI_COMM_WORLD_RANK=3\0OMPI_COMM_WORLD_LOCAL_RANK=3\0"
      "OMPI_COMM_WORLD_LOCAL_SIZE=4"s);  // the last entry need not end in '\0'
  EXPECT_EQ(ompi.rank, 3);
  EXPECT_EQ(ompi.rank_variable, "OMPI_COMM_WORLD_RANK");
  EXPECT_EQ(ompi.local_rank, 3);
  EXPECT_EQ(ompi.world_size, 4);
  EXPECT_EQ(ompi.local_world_size, 4);
  const RankEnv pmi = parse_rank_env("PMI_RANK=7\0PMI_SIZE=16\0MPI_LOCALRANKID=3\0"s);
  EXPECT_EQ(pmi.rank, 7);
  EXPECT_EQ(pmi.rank_variable, "PMI_RANK");
  EXPECT_EQ(pmi.local_rank, 3);
  EXPECT_EQ(pmi.world_size, 16);
  EXPECT_FALSE(pmi.local_world_size);
}

// RANK wins over the MPI variables; LOCAL_RANK alone stands in for the rank (one node).
TEST(RankEnv, PreferenceOrder) {
  const RankEnv both = parse_rank_env("PMI_RANK=1\0OMPI_COMM_WORLD_RANK=2\0RANK=3\0"s);
  EXPECT_EQ(both.rank, 3);
  EXPECT_EQ(both.rank_variable, "RANK");
  const RankEnv mpi = parse_rank_env("PMI_RANK=1\0OMPI_COMM_WORLD_RANK=2\0"s);
  EXPECT_EQ(mpi.rank, 2);
  const RankEnv local = parse_rank_env("LOCAL_RANK=6\0"s);
  EXPECT_EQ(local.rank, 6);
  EXPECT_EQ(local.rank_variable, "LOCAL_RANK");
  EXPECT_EQ(local.local_rank, 6);
}

// A value that is not a whole number >= 0 is not a rank; the next variable is tried. Names that
// merely contain RANK are not rank variables.
TEST(RankEnv, WhatIsNotARank) {
  for (const std::string value : {"", "-1", "3a", " 3", "x", "99999999999999999999"}) {
    const RankEnv env = parse_rank_env("RANK=" + value + "\0PMI_RANK=4\0"s);
    EXPECT_EQ(env.rank, 4) << "RANK=" << value;
    EXPECT_EQ(env.rank_variable, "PMI_RANK");
  }
  EXPECT_FALSE(parse_rank_env("MY_RANK=1\0RANKING=2\0NORANK\0=3\0"s).rank);
  EXPECT_FALSE(parse_rank_env("").rank);
  EXPECT_FALSE(parse_rank_env("\0\0\0"s).rank);
  // As getenv does, the first of a repeated name counts.
  EXPECT_EQ(parse_rank_env("RANK=1\0RANK=2\0"s).rank, 1);
}

// Random blocks of rank-like and other entries never crash the parser, and whenever it finds a
// rank, that exact "NAME=value" entry is in the block.
TEST(RankEnv, RandomBlocks) {
  std::mt19937 random(14);  // fixed seed: the same blocks every run
  const std::vector<std::string> names{
      "RANK", "LOCAL_RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "WORLD_SIZE", "X", "", "RANK="};
  const std::vector<std::string> values{"0", "1", "12", "-3", "", "a", "2147483647", "2147483648"};
  for (int round = 0; round < 2000; ++round) {
    std::string block;
    const int entries = static_cast<int>(random() % 6);
    for (int i = 0; i < entries; ++i) {
      block += names[random() % names.size()] + "=" + values[random() % values.size()];
      if (random() % 4 != 0) block += '\0';
    }
    const RankEnv env = parse_rank_env(block);
    if (!env.rank) continue;
    ASSERT_GE(*env.rank, 0);
    const std::string entry = env.rank_variable + "=" + std::to_string(*env.rank);
    EXPECT_NE(block.find(entry), std::string::npos) << entry;
  }
}

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

RunProcess process(int pid, int ppid, std::int64_t peak, std::optional<int> rank,
                   std::vector<std::int64_t> rss = {}) {
  RunProcess p;
  p.pid = pid;
  p.ppid = ppid;
  p.command = "proc " + std::to_string(pid);
  p.peak_rss = peak;
  p.peak_rss_source = "VmHWM";
  for (std::size_t i = 0; i < rss.size(); ++i) p.t.push_back(0.1 * static_cast<double>(i));
  p.rss = std::move(rss);
  if (rank) {
    p.rank.rank = rank;
    p.rank.rank_variable = "RANK";
    p.rank.local_rank = *rank % 2;
    p.rank.world_size = 4;
  }
  return p;
}

// A launcher (no rank), ranks 3, 1, 0 in that order of appearance, rank 1 with a worker child
// whose RSS adds to its own at the same samples, and a stage marked by rank 3.
RunRecord job() {
  RunRecord record;
  record.t = {0.0, 0.1, 0.2};
  record.tree_rss = {80 * MiB, 530 * MiB, 260 * MiB};
  record.processes.push_back(process(10, 1, 500 * MiB, std::nullopt, {1, 2, 3}));
  record.processes.push_back(process(13, 10, 400 * MiB, 3, {1, 400 * MiB, 1}));
  record.processes.push_back(process(11, 10, 100 * MiB, 1, {80 * MiB, 90 * MiB, 10 * MiB}));
  record.processes.push_back(process(20, 11, 50 * MiB, 1, {0, 40 * MiB, 50 * MiB}));
  record.processes.push_back(process(12, 10, 200 * MiB, 0, {1, 2, 200 * MiB}));
  record.stages.push_back(RunStage{"train", 13, 0.0, 0.2, -1, -1, {}});
  record.stages.push_back(RunStage{"eval", 13, 0.1, 0.2, -1, -1, {}});
  record.stages.push_back(RunStage{"train", 99, 0.0, 0.2, -1, -1, {}});  // another pid
  return record;
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

TEST(RunRanks, RoundTripThroughJson) {
  RunRecord record = job();
  record.ranks = group_ranks(record);
  const nlohmann::json json = run_record_to_json(record);
  ASSERT_TRUE(json.contains("ranks"));
  EXPECT_EQ(json["ranks"].size(), 3U);
  EXPECT_EQ(json["processes"][1]["rank"]["rank"], 3);
  EXPECT_FALSE(json["processes"][0].contains("rank"));  // the launcher
  const RunRecord back = run_record_from_json(nlohmann::json::parse(json.dump()), "run.json");
  ASSERT_EQ(back.ranks.size(), 3U);
  EXPECT_EQ(back.ranks[1].pids, (std::vector<int>{11, 20}));
  EXPECT_EQ(back.ranks[1].peak_rss_source, "sampled sum");
  EXPECT_EQ(back.ranks[1].sum_of_peaks, 150 * MiB);
  EXPECT_EQ(back.ranks[2].stages, (std::vector<std::string>{"train", "eval"}));
  EXPECT_EQ(back.processes[3].rank.rank, 1);
  EXPECT_EQ(back.processes[3].rank.world_size, 4);
  EXPECT_FALSE(back.processes[0].rank.rank);
  EXPECT_EQ(run_record_to_json(back), json);

  // A recording without ranks (older, or no distributed job) reads as none.
  nlohmann::json plain = json;
  plain.erase("ranks");
  EXPECT_TRUE(run_record_from_json(plain, "run.json").ranks.empty());
  // A wrong field is named with its path.
  nlohmann::json broken = json;
  broken["ranks"][1]["peak_rss"] = "big";
  try {
    (void)run_record_from_json(broken, "run.json");
    FAIL() << "a string peak_rss was accepted";
  } catch (const InputFailure& e) {
    EXPECT_NE(std::string(e.what()).find("ranks[1].peak_rss"), std::string::npos) << e.what();
  }
}

TEST(RunRanks, SummaryHasOneLinePerRankAndTheMax) {
  RunRecord record = job();
  record.ranks = group_ranks(record);
  const std::string text = format_run_summary(record);
  EXPECT_NE(text.find("Ranks (from each process's environment: RANK)"), std::string::npos);
  EXPECT_NE(text.find("max 400.00 MiB (rank 3), min 130.00 MiB (rank 1)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("3 of the job's 4 ranks"), std::string::npos) << text;
  EXPECT_NE(text.find("sum of peaks"), std::string::npos) << text;
  EXPECT_EQ(format_run_summary(RunRecord{}).find("Ranks"), std::string::npos);
}

}  // namespace
}  // namespace memscope::cli
