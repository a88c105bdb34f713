// `memscope diff --fail-above PCT`: which peaks of a diff grew by more than PCT percent
// (diff.hpp), so CI can fail a change that makes a run need more memory.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "diff/diff.hpp"

namespace memscope::cli {

double PeakChange::percent() const noexcept {
  if (a == 0.0) return b == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  return 100.0 * (b - a) / a;
}

std::vector<PeakChange> peak_changes(const MetricsDiff& diff) {
  std::vector<PeakChange> out;
  for (const MetricsDiff::Row& row : diff.rows) {
    if (row.kind != MetricsDiff::Kind::memory || !row.numeric_both()) continue;
    if (row.key.find("peak") == std::string_view::npos) continue;
    const auto number = [](const MetricValue& v) {
      return std::holds_alternative<double>(v) ? std::get<double>(v)
                                               : static_cast<double>(std::get<std::int64_t>(v));
    };
    out.push_back({std::string(row.key), number(*row.a), number(*row.b)});
  }
  return out;
}

std::vector<PeakChange> peak_changes(const RunDiff& diff) {
  std::vector<PeakChange> out;
  for (const RunDiff::Line& line : diff.overall) {
    if (line.bytes && line.both() && line.figure.find("peak") != std::string::npos) {
      out.push_back({line.figure, *line.a, *line.b});
    }
  }
  for (const RunDiff::Line& line : diff.stages) {
    if (line.bytes && line.both() && line.figure.find("peak") != std::string::npos) {
      out.push_back({"stage " + line.where + ": " + line.figure, *line.a, *line.b});
    }
  }
  return out;
}

std::vector<PeakChange> peak_changes(const TraceDiff& diff) {
  return {
      {"peak reserved", static_cast<double>(diff.a.peak_reserved),
       static_cast<double>(diff.b.peak_reserved)},
      {"peak live", static_cast<double>(diff.a.peak_live), static_cast<double>(diff.b.peak_live)}};
}

std::vector<PeakChange> peaks_above(const std::vector<PeakChange>& peaks, double percent) {
  std::vector<PeakChange> out;
  for (const PeakChange& p : peaks) {
    if (p.percent() > percent) out.push_back(p);
  }
  std::stable_sort(out.begin(), out.end(), [](const PeakChange& x, const PeakChange& y) {
    return x.percent() > y.percent();
  });
  return out;
}

}  // namespace memscope::cli
