// The rank variables of an environ block (include/memscope/rank_env.hpp): torchrun's, Open
// MPI's, PMI's, their order of preference, what is not a rank, and random blocks. A real child's
// environment read back from /proc is in tests/tracker/run_ranks_test.cpp.
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "memscope/rank_env.hpp"

namespace memscope {
namespace {

using namespace std::string_literals;

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

}  // namespace
}  // namespace memscope
