// Min/max bucket decimation (decimate.hpp).
#include "memscope/report_decimate.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace memscope::report {

namespace {

// The indices one bucket keeps; kNone marks an empty bucket.
struct Bucket {
  static constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  std::size_t first = kNone;
  std::size_t low = kNone;
  std::size_t high = kNone;
  std::size_t last = kNone;
};

}  // namespace

DecimatedSeries decimate(const std::vector<double>& t, const std::vector<double>& values,
                         std::size_t max_points) {
  const std::size_t n = std::min(t.size(), values.size());
  DecimatedSeries out;
  out.original_points = n;
  const std::size_t limit = std::max(max_points, kMinDecimatedPoints);
  if (n <= limit) {
    out.t.assign(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(n));
    out.values.assign(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(n));
    return out;
  }
  // Four points per bucket at most, so limit / 4 buckets stay within the limit.
  const std::size_t bucket_count = limit / 4;
  std::vector<Bucket> buckets(bucket_count);
  const double t0 = t.front();
  const double span = t[n - 1] - t0;
  const double last_bucket = static_cast<double>(bucket_count - 1);
  for (std::size_t i = 0; i < n; ++i) {
    // By time when time advances; by position when every point has the same time (a trace
    // with no clock), so the buckets still split the series.
    const double where =
        span > 0.0 ? (t[i] - t0) / span : static_cast<double>(i) / static_cast<double>(n - 1);
    const double slot =
        std::clamp(std::floor(where * static_cast<double>(bucket_count)), 0.0, last_bucket);
    Bucket& b = buckets[static_cast<std::size_t>(slot)];
    if (b.first == Bucket::kNone) {
      b.first = b.low = b.high = i;
    } else {
      if (values[i] < values[b.low]) b.low = i;
      // Strictly greater: the first time the maximum is reached is the one kept, so the peak
      // drawn is where the series first got there.
      if (values[i] > values[b.high]) b.high = i;
    }
    b.last = i;
  }
  out.t.reserve(bucket_count * 4);
  out.values.reserve(bucket_count * 4);
  for (const Bucket& b : buckets) {
    if (b.first == Bucket::kNone) continue;
    std::array<std::size_t, 4> keep{b.first, b.low, b.high, b.last};
    std::sort(keep.begin(), keep.end());
    const auto* end = std::unique(keep.begin(), keep.end());
    for (const auto* it = keep.begin(); it != end; ++it) {
      out.t.push_back(t[*it]);
      out.values.push_back(values[*it]);
    }
  }
  return out;
}

}  // namespace memscope::report
