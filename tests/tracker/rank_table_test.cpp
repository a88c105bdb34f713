// The cross-rank table in one process, no MPI: the reduction (missing keys, ties), the text
// layout and the JSON field names shared with Python.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memscope/rank_table.hpp>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace {

using memscope::reduce;
using Ranks = std::vector<std::map<std::string, double>>;

TEST(RankTable, MissingKeysAreNotZeroAndTiesGoToTheLowestRank) {
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

TEST(RankTable, RandomTablesAgreeWithADirectCount) {
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

TEST(RankTable, JsonCarriesPythonsFieldNames) {
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

TEST(RankTable, FormatAlignsUsesByteUnitsAndAbbreviatesMissingRanks) {
  Ranks ranks(6);
  ranks[0] = {{"train_mem_gpu_peaked_delta", 3 << 20}, {"loss", 0.5}};
  ranks[5] = {{"train_mem_gpu_peaked_delta", 7 << 20}};
  const std::string text = reduce(ranks).format();
  std::vector<std::string> lines;
  for (std::size_t at = 0, end = 0; (end = text.find('\n', at)) != std::string::npos;
       at = end + 1) {
    lines.push_back(text.substr(at, end - at));
  }
  ASSERT_EQ(lines.size(), 4U) << text;
  EXPECT_EQ(lines[0], "memscope: 2 metrics over 6 ranks");
  for (std::size_t i = 2; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].size(), lines[1].size()) << "row " << i << " not aligned:\n" << text;
  }
  EXPECT_EQ(lines[1].substr(0, 3), "key");
  // Sorted keys: loss (a fraction, missing on 1-5), then the memory key in byte units.
  EXPECT_EQ(lines[2].substr(0, 4), "loss");
  EXPECT_TRUE(lines[2].ends_with("  1-5")) << lines[2];
  EXPECT_NE(lines[2].find(" 0.5 "), std::string::npos) << lines[2];
  const std::string& row = lines[3];
  for (const char* cell : {"3.00 MiB", "7.00 MiB", "5.00 MiB", "10.00 MiB"}) {
    EXPECT_NE(row.find(cell), std::string::npos) << cell << " in " << row;
  }
  EXPECT_TRUE(row.ends_with("  1-4")) << row;
  EXPECT_TRUE(reduce({{{"x", 1}}, {{"x", 2}}}).format().find("  -\n") != std::string::npos)
      << "a key no rank misses shows '-'";
}

TEST(RankTable, JsonKeepsInfinitiesOutAndFractionsAsFloats) {
  const auto j = nlohmann::json::parse(
      reduce({{{"a", std::numeric_limits<double>::infinity()}, {"b", 0.25}}}).to_json());
  EXPECT_TRUE(j.at("ranks")[0].at("a").is_null());
  EXPECT_EQ(j.at("ranks")[0].at("b"), 0.25);
  EXPECT_TRUE(j.at("reductions").at("b").at("mean").is_number_float());
}

}  // namespace
