// Decimation of a memory-over-time series before it goes into an HTML page: a page with a
// million points per line is slow to load and to hover, and a screen has a few thousand pixel
// columns anyway. What must survive is what a person looks for: every peak and trough and the
// shape between them. So time is split into equal buckets and each bucket keeps its first,
// lowest, highest and last point, in time order; the series' highest point is always kept
// (it is the highest of its bucket), so the peak drawn is the true peak.
//
// Thread safety: a pure function. Errors: none (inputs of different lengths use the shorter).
#pragma once

#include <cstddef>
#include <vector>

namespace memscope::report {

struct DecimatedSeries {
  std::vector<double> t;
  std::vector<double> values;
  std::size_t original_points = 0;  // before decimation
  [[nodiscard]] bool decimated() const noexcept { return t.size() < original_points; }
};

// The smallest max_points honoured; below it, kMinPoints is used (one bucket keeps up to four).
inline constexpr std::size_t kMinDecimatedPoints = 8;

// At most max(max_points, kMinDecimatedPoints) points of (t, values); `t` must be
// non-decreasing. A series that already fits is returned unchanged. O(n) time.
[[nodiscard]] DecimatedSeries decimate(const std::vector<double>& t,
                                       const std::vector<double>& values, std::size_t max_points);

}  // namespace memscope::report
