// The reduction gather() applies, checked in one process: missing keys, ties, the JSON field
// names shared with Python, and the error when MPI was never initialised (this binary never
// calls MPI_Init).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memscope/mpi.hpp>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace {

using memscope::mpi::reduce;
using Ranks = std::vector<std::map<std::string, double>>;

TEST(MpiReduce, MissingKeysAreNotZeroAndTiesGoToTheLowestRank) {
  const Ranks ranks{{{"a", 5}, {"b", -1}}, {{"a", 9}}, {{"a", 9}, {"b", -4}}, {{"b", 2}}};
  const auto t = reduce(ranks);
  ASSERT_EQ(t.world_size, 4);
  const auto& a = t.reductions.at("a");
  EXPECT_EQ(a.min, 5);
  EXPECT_EQ(a.max, 9);
  EXPECT_EQ(a.argmax, 1);  // ranks 1 and 2 tie
  EXPECT_EQ(a.sum, 23);
  EXPECT_EQ(a.mean, 23.0 / 3);  // over the 3 ranks that have it, not 4
  EXPECT_EQ(a.count, 3);
  EXPECT_EQ(a.missing, std::vector<int>{3});
  const auto& b = t.reductions.at("b");
  EXPECT_EQ(b.min, -4);  // a missing value would have been 0 and not the min
  EXPECT_EQ(b.argmax, 3);
  EXPECT_EQ(b.missing, std::vector<int>{1});
  EXPECT_EQ(t.ranks, ranks);
}

TEST(MpiReduce, RandomTablesAgreeWithADirectCount) {
  std::mt19937_64 rng(15);
  std::uniform_int_distribution<int> ranks_dist(1, 40);
  std::uniform_int_distribution<int> value(-3, 3);  // few values: many ties
  std::bernoulli_distribution has(0.7);
  for (int trial = 0; trial < 200; ++trial) {
    Ranks ranks(static_cast<std::size_t>(ranks_dist(rng)));
    for (auto& r : ranks) {
      for (int k = 0; k < 6; ++k) {
        std::string key = "k";  // (not "k" + ...: GCC 12's -Wrestrict false positive)
        key += std::to_string(k);
        if (has(rng)) r[key] = value(rng);
      }
    }
    const auto t = reduce(ranks);
    for (const auto& [key, red] : t.reductions) {
      std::vector<int> missing;
      int count = 0;
      double sum = 0;
      double max = -std::numeric_limits<double>::infinity();
      double min = std::numeric_limits<double>::infinity();
      int argmax = -1;
      for (int r = 0; r < t.world_size; ++r) {
        const auto& values = ranks[static_cast<std::size_t>(r)];
        if (!values.contains(key)) {
          missing.push_back(r);
          continue;
        }
        const double v = values.at(key);
        ++count;
        sum += v;
        min = std::min(min, v);
        if (v > max) {
          max = v;
          argmax = r;
        }
      }
      EXPECT_EQ(red.missing, missing) << key;
      EXPECT_EQ(red.count, count) << key;
      EXPECT_EQ(red.sum, sum) << key;
      EXPECT_EQ(red.min, min) << key;
      EXPECT_EQ(red.max, max) << key;
      EXPECT_EQ(red.argmax, argmax) << key;
      EXPECT_EQ(red.mean, sum / count) << key;
    }
  }
}

TEST(MpiReduce, JsonCarriesPythonsFieldNames) {
  const auto t = reduce({{{"train_mem_cpu_alloc_delta", 1024}}, {}});
  const auto j = nlohmann::json::parse(t.to_json());
  EXPECT_EQ(j.at("world_size"), 2);
  ASSERT_EQ(j.at("ranks").size(), 2U);
  EXPECT_EQ(j.at("ranks")[0].at("train_mem_cpu_alloc_delta"), 1024);
  EXPECT_TRUE(j.at("ranks")[1].empty());
  const auto& r = j.at("reductions").at("train_mem_cpu_alloc_delta");
  for (const char* field : {"min", "max", "mean", "sum", "argmax", "count", "missing"}) {
    EXPECT_TRUE(r.contains(field)) << field;
  }
  EXPECT_EQ(r.at("missing"), std::vector<int>{1});
  const std::string text = t.format();
  EXPECT_NE(text.find("train_mem_cpu_alloc_delta"), std::string::npos) << text;
  EXPECT_NE(text.find("missing"), std::string::npos) << text;
}

TEST(MpiGather, RefusesToRunBeforeMpiInit) {
  try {
    (void)memscope::mpi::gather(std::map<std::string, double>{{"a", 1}});
    FAIL() << "gather() ran without MPI_Init";
  } catch (const memscope::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("MPI_Init"), std::string::npos) << e.what();
  }
}

}  // namespace
