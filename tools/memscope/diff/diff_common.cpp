// Formatting shared by the diffs (diff.hpp).
#include <fmt/format.h>

#include <cmath>

#include "diff/diff.hpp"
#include "memscope/json_envelope.hpp"
#include "memscope/units.hpp"

namespace memscope::cli {

std::string signed_bytes(std::int64_t change) {
  if (change == 0) return "0 B";
  std::string out = format_bytes(change);
  if (change > 0) out.insert(out.begin(), '+');
  return out;
}

std::string percent_change(double a, double b) {
  if (a == 0.0) return b == 0.0 ? std::string() : std::string("new");
  const double pct = 100.0 * (b - a) / std::fabs(a);
  return fmt::format("{:+.1f}%", pct);
}

nlohmann::json percent_json(double a, double b) {
  if (a == 0.0) return nullptr;
  return 100.0 * (b - a) / std::fabs(a);
}

nlohmann::json diff_json(const char* kind, const DiffNames& names, const std::string& summary) {
  nlohmann::json out = report::envelope("diff", 1);
  out.update(nlohmann::json{{"kind", kind}, {"a", names.a}, {"b", names.b}, {"summary", summary}});
  return out;
}

std::string more_note(std::size_t total, std::size_t shown, const char* what) {
  if (shown >= total) return {};
  return fmt::format("{} more {}; --top shows more, --json has all", total - shown, what);
}

}  // namespace memscope::cli
