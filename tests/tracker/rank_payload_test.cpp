// The gather's wire format without any transport: what a row holds, that every value comes
// back exactly with its type, when rows say the table must grow, and the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memscope/errors.hpp>
#include <memscope/rank_payload.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace {

using memscope::RankMetrics;

constexpr std::int64_t kExact = std::int64_t{1} << 53;

TEST(RankPayload, RowHoldsFitsValuesAndIntFlags) {
  const std::vector<std::string> table{"a", "b", "c"};
  const auto row = memscope::encode_payload(table, {{"a", std::int64_t{5}}, {"c", 0.5}}, "t");
  ASSERT_EQ(row.size(), 1U + 3U + 1U);
  EXPECT_EQ(row[0], 1.0);  // every key of this rank is in the table
  EXPECT_EQ(row[1], 5.0);
  EXPECT_TRUE(std::isnan(row[2]));  // b: missing, never 0
  EXPECT_EQ(row[3], 0.5);
  EXPECT_EQ(row[4], 1.0);  // int flags: bit 0 (a) only
}

TEST(RankPayload, RandomRowsComeBackExactlyWithTheirTypes) {
  std::mt19937_64 rng(15);
  std::uniform_int_distribution<std::int64_t> ints(-kExact, kExact);
  std::uniform_real_distribution<double> doubles(-1e300, 1e300);
  std::uniform_real_distribution<double> pick(0, 1);
  const std::vector<double> odd{0.0, -0.0, std::numeric_limits<double>::infinity(),
                                -std::numeric_limits<double>::infinity(), 5e-324};
  for (int trial = 0; trial < 200; ++trial) {
    std::set<std::string> keys;
    const auto count = std::uniform_int_distribution<int>(1, 130)(rng);
    for (int k = 0; k < count; ++k) {
      std::string key = "k";  // (not "k" + ...: GCC 12's -Wrestrict false positive)
      key += std::to_string(std::uniform_int_distribution<int>(0, 399)(rng));
      keys.insert(key);
    }
    const std::vector<std::string> table(keys.begin(), keys.end());
    std::vector<RankMetrics> ranks(3);
    for (auto& mine : ranks) {
      for (const auto& key : table) {
        const double p = pick(rng);
        if (p < 0.4) {
          mine[key] = ints(rng);
        } else if (p < 0.7) {
          mine[key] = doubles(rng);
        } else if (p < 0.8) {
          mine[key] = odd[rng() % odd.size()];
        }
      }
    }
    std::vector<double> rows;
    for (const auto& mine : ranks) {
      const auto row = memscope::encode_payload(table, mine, "t");
      ASSERT_EQ(row.size(), memscope::payload_width(table.size()));
      ASSERT_EQ(row.size(), 1 + table.size() + (table.size() + 51) / 52);
      rows.insert(rows.end(), row.begin(), row.end());
    }
    ASSERT_TRUE(memscope::payload_fits(rows, table.size()));
    const auto back = memscope::decode_payload(rows, table);
    ASSERT_EQ(back.size(), ranks.size());
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      EXPECT_EQ(back[r], ranks[r]) << "trial " << trial << " rank " << r;  // types included
      for (const auto& [key, v] : ranks[r]) {
        if (const auto* d = std::get_if<double>(&v); d != nullptr && *d == 0) {
          EXPECT_EQ(std::signbit(std::get<double>(back[r].at(key))), std::signbit(*d)) << key;
        }
      }
    }
  }
}

TEST(RankPayload, AKeyOutsideTheTableMakesEveryRankAgreeAGrownTable) {
  std::vector<std::string> table{"a", "b"};
  const RankMetrics plain{{"a", 1.0}};
  const RankMetrics with_new{{"a", 2.0}, {"z", std::int64_t{3}}};
  auto rows = memscope::encode_payload(table, plain, "t");
  const auto other = memscope::encode_payload(table, with_new, "t");
  EXPECT_EQ(other[0], 0.0);
  rows.insert(rows.end(), other.begin(), other.end());
  EXPECT_FALSE(memscope::payload_fits(rows, table.size()));
  // Every rank sends its keys; the table keeps its old keys and gains the new, sorted.
  const std::string blobs = memscope::key_blob(plain) + memscope::key_blob(with_new);
  EXPECT_EQ(blobs, std::string("a\0a\0z\0", 6));
  table = memscope::agree_table(table, blobs);
  EXPECT_EQ(table, (std::vector<std::string>{"a", "b", "z"}));
  EXPECT_EQ(memscope::agree_table({}, ""), std::vector<std::string>{});
  const auto row = memscope::encode_payload(table, with_new, "t");
  EXPECT_TRUE(memscope::payload_fits(row, table.size()));
  EXPECT_EQ(memscope::decode_payload(row, table)[0], with_new);
}

TEST(RankPayload, RefusesWhatItCannotCarryNamingTheKey) {
  const auto refused = [](const RankMetrics& m, const std::string& needle) {
    try {
      memscope::check_rank_metrics(m, "caller_name");
      ADD_FAILURE() << "accepted " << needle;
    } catch (const memscope::UsageError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("caller_name"), std::string::npos) << what;
      EXPECT_NE(what.find(needle), std::string::npos) << what;
    }
  };
  refused({{"nan_key", std::nan("")}}, "'nan_key' is NaN");
  refused({{"huge", kExact + 1}}, "'huge' is an integer beyond 2**53");
  refused({{"low", -kExact - 1}}, "'low'");
  refused({{std::string("a\0b", 3), 1.0}}, "NUL");
  memscope::check_rank_metrics({{"edge", kExact}, {"minus", -kExact}}, "caller_name");
  EXPECT_THROW((void)memscope::encode_payload({"x"}, {{"x", std::nan("")}}, "c"),
               memscope::UsageError);
  EXPECT_THROW((void)memscope::decode_payload(std::vector<double>(5), {"a", "b"}),
               memscope::UsageError);  // rows of 4 for two keys
}

TEST(RankPayload, TrackerMetricsKeepTheirNumbersAndTypes) {
  const memscope::Metrics m{{"train_mem_cpu_alloc_delta", std::int64_t{7}},
                            {"train_runtime", 0.5},
                            {"train_mem_cpu_mode", std::string("kernel-hwm")}};
  const auto numbers = memscope::numeric_metrics(m);
  EXPECT_EQ(numbers,
            (RankMetrics{{"train_mem_cpu_alloc_delta", std::int64_t{7}}, {"train_runtime", 0.5}}));
  EXPECT_EQ(memscope::as_doubles(numbers).at("train_mem_cpu_alloc_delta"), 7.0);
}

}  // namespace
