// decimate() (include/memscope/report_decimate.hpp): what an HTML report's lines keep of long
// series.
#include "memscope/report_decimate.hpp"

#include <algorithm>
#include <cstddef>
#include <vector>

#include <gtest/gtest.h>

namespace memscope::report {
namespace {

struct Input {
  std::vector<double> t;
  std::vector<double> v;
};

Input noisy(std::size_t n, std::size_t peak_at) {
  Input in;
  for (std::size_t i = 0; i < n; ++i) {
    in.t.push_back(static_cast<double>(i) * 0.5);
    in.v.push_back(static_cast<double>((i * 2654435761ULL) % 1000));
  }
  in.v[peak_at] = 5000.0;
  return in;
}

TEST(Decimate, SmallSeriesPassUnchanged) {
  const Input in = noisy(100, 42);
  const DecimatedSeries d = decimate(in.t, in.v, 4000);
  EXPECT_EQ(d.t, in.t);
  EXPECT_EQ(d.values, in.v);
  EXPECT_EQ(d.original_points, 100U);
  EXPECT_FALSE(d.decimated());
}

TEST(Decimate, KeepsTheMaximumWithinTheLimitInTimeOrder) {
  for (const std::size_t peak_at : {std::size_t{0}, std::size_t{77'777}, std::size_t{199'999}}) {
    const Input in = noisy(200'000, peak_at);
    const DecimatedSeries d = decimate(in.t, in.v, 4000);
    ASSERT_TRUE(d.decimated());
    EXPECT_LE(d.t.size(), 4000U);
    EXPECT_GT(d.t.size(), 3000U);  // the buckets are used, not left empty
    ASSERT_EQ(d.t.size(), d.values.size());
    EXPECT_TRUE(std::is_sorted(d.t.begin(), d.t.end()));
    EXPECT_EQ(std::adjacent_find(d.t.begin(), d.t.end()), d.t.end());  // no point twice
    const auto top = std::max_element(d.values.begin(), d.values.end());
    EXPECT_EQ(*top, 5000.0);
    EXPECT_EQ(d.t[static_cast<std::size_t>(top - d.values.begin())], in.t[peak_at]);
    // Every point kept is a point of the input, with its own value.
    for (std::size_t i = 0; i < d.t.size(); ++i) {
      EXPECT_EQ(in.v[static_cast<std::size_t>(d.t[i] / 0.5)], d.values[i]);
    }
    // The first and last points stay: the line spans the whole time.
    EXPECT_EQ(d.t.front(), in.t.front());
    EXPECT_EQ(d.t.back(), in.t.back());
  }
}

TEST(Decimate, KeepsTheMinimumOfEachBucket) {
  Input in = noisy(100'000, 10);
  in.v[50'000] = -7.0;
  const DecimatedSeries d = decimate(in.t, in.v, 1000);
  EXPECT_EQ(*std::min_element(d.values.begin(), d.values.end()), -7.0);
}

TEST(Decimate, SplitsByPositionWhenTimeDoesNotAdvance) {
  Input in = noisy(10'000, 1234);
  std::fill(in.t.begin(), in.t.end(), 3.0);
  const DecimatedSeries d = decimate(in.t, in.v, 400);
  EXPECT_LE(d.t.size(), 400U);
  EXPECT_GT(d.t.size(), 200U);
  EXPECT_EQ(*std::max_element(d.values.begin(), d.values.end()), 5000.0);
}

TEST(Decimate, UnevenTimesAndATinyLimit) {
  Input in;
  for (std::size_t i = 0; i < 5000; ++i) {
    // Dense at the start, sparse later: many buckets are empty.
    in.t.push_back(static_cast<double>(i * i) * 1e-3);
    in.v.push_back(static_cast<double>(i % 17));
  }
  in.v[4999] = 99.0;
  const DecimatedSeries d = decimate(in.t, in.v, 1);  // raised to kMinDecimatedPoints
  EXPECT_LE(d.t.size(), kMinDecimatedPoints);
  EXPECT_EQ(d.values.back(), 99.0);
  EXPECT_TRUE(std::is_sorted(d.t.begin(), d.t.end()));
}

TEST(Decimate, LengthsThatDifferUseTheShorter) {
  const DecimatedSeries d = decimate({0.0, 1.0, 2.0}, {5.0, 6.0}, 4000);
  EXPECT_EQ(d.t.size(), 2U);
  EXPECT_EQ(d.original_points, 2U);
}

}  // namespace
}  // namespace memscope::report
