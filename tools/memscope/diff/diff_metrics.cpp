// diff_metrics (diff.hpp): two saved metrics files, key by key.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "diff/diff.hpp"
#include "memscope/metrics.hpp"
#include "memscope/units.hpp"

namespace memscope::cli {
namespace {

using Kind = MetricsDiff::Kind;
using Row = MetricsDiff::Row;

// metric_unit(), the rule format_metrics_table() follows, so a key reads the same in both.
Kind kind_of(std::string_view key, const MetricValue* a, const MetricValue* b) {
  const auto is_text = [](const MetricValue* v) {
    return v && std::holds_alternative<std::string>(*v);
  };
  if (is_text(a) || is_text(b)) return Kind::text;
  switch (metric_unit(key)) {
    case MetricUnit::memory:
    case MetricUnit::bytes:
      return Kind::memory;
    case MetricUnit::seconds:
      return Kind::seconds;
    case MetricUnit::flops:
    case MetricUnit::number:
      break;
  }
  return Kind::number;
}

// The stage of a key as format_metrics_table() groups it: the text before the first '_';
// before_init_* belongs to init.
std::string stage_of(std::string_view key) {
  if (key.starts_with("before_init_")) return "init";
  const std::size_t underscore = key.find('_');
  return underscore == std::string_view::npos ? std::string()
                                              : std::string(key.substr(0, underscore));
}

double number(const MetricValue& v) noexcept {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  return 0.0;
}

std::string text_of(const MetricValue* v, Kind kind) {
  if (!v) return "-";
  if (const auto* s = std::get_if<std::string>(&*v)) return *s;
  const double x = number(*v);
  switch (kind) {
    case Kind::memory:
      return format_bytes(static_cast<std::int64_t>(x));
    case Kind::seconds:
      return fmt::format("{:.3f} s", x);
    default:
      break;
  }
  if (std::holds_alternative<std::int64_t>(*v)) return std::to_string(std::get<std::int64_t>(*v));
  return fmt::format("{:.6g}", x);
}

std::string change_text(double change, Kind kind) {
  switch (kind) {
    case Kind::memory:
      return signed_bytes(static_cast<std::int64_t>(change));
    case Kind::seconds:
      return fmt::format("{:+.3f} s", change);
    default:
      return fmt::format("{:+.6g}", change);
  }
}

nlohmann::json value_json(const MetricValue* v) {
  if (!v) return nullptr;
  return std::visit([](const auto& x) { return nlohmann::json(x); }, *v);
}

// Every key of either file: memory first, the largest absolute change first; then the rest by
// the largest relative change, keys in one file only last.
std::vector<Row> metric_rows(const Metrics& a, const Metrics& b) {
  // Both maps are sorted by key: one walk over the two, in key order, holds no key twice.
  std::vector<Row> rows;
  rows.reserve(std::max(a.size(), b.size()));
  auto in_a = a.begin();
  auto in_b = b.begin();
  while (in_a != a.end() || in_b != b.end()) {
    Row row;
    const bool take_a = in_b == b.end() || (in_a != a.end() && in_a->first <= in_b->first);
    const bool take_b = in_a == a.end() || (in_b != b.end() && in_b->first <= in_a->first);
    if (take_a) {
      row.key = in_a->first;
      row.a = &(in_a++)->second;
    }
    if (take_b) {
      row.key = in_b->first;
      row.b = &(in_b++)->second;
    }
    row.kind = kind_of(row.key, row.a, row.b);
    rows.push_back(row);
  }
  const auto rank = [](const Row& r) {
    if (!r.numeric_both()) return 2;
    return r.kind == Kind::memory ? 0 : 1;
  };
  // A NaN (Python's NaN token reads as one) counts as the smallest change: compared as it is,
  // it broke the sort's ordering, which then wrote out of bounds (a crash at exit).
  const auto ordered = [](double v) { return std::isnan(v) ? -1.0 : v; };
  const auto relative = [&](const Row& r) {
    const double base = std::fabs(number(*r.a));
    return ordered(base == 0.0 ? std::fabs(r.change()) : std::fabs(r.change()) / base);
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const Row& x, const Row& y) {
    if (rank(x) != rank(y)) return rank(x) < rank(y);
    if (rank(x) == 0) return ordered(std::fabs(x.change())) > ordered(std::fabs(y.change()));
    if (rank(x) == 1) return relative(x) > relative(y);
    return false;
  });
  return rows;
}

// How many keys changed, and how many are in one file only.
struct KeyCounts {
  std::size_t changed = 0;
  std::size_t only_a = 0;
  std::size_t only_b = 0;
};

// The change column: a signed figure, "only in A/B", "changed" (text) or "" (equal).
std::string change_cell(const Row& r, KeyCounts& counts) {
  if (r.numeric_both()) {
    if (r.change() != 0.0) ++counts.changed;
    return change_text(r.change(), r.kind);
  }
  if (!r.a) {
    ++counts.only_b;
    return "only in B";
  }
  if (!r.b) {
    ++counts.only_a;
    return "only in A";
  }
  if (text_of(r.a, r.kind) != text_of(r.b, r.kind)) {
    ++counts.changed;
    return "changed";
  }
  return "";
}

// "largest memory change: train_mem_gpu_alloc_delta +1.00 GiB (+50.0%); 3 of 9 keys changed, 1
// only in A, 0 only in B".
std::string metrics_verdict(const std::vector<Row>& rows, const KeyCounts& counts) {
  std::string summary;
  const auto biggest = std::find_if(rows.begin(), rows.end(), [](const Row& r) {
    return r.kind == Kind::memory && r.numeric_both() && r.change() != 0.0;
  });
  if (biggest != rows.end()) {
    const std::string pct = percent_change(number(*biggest->a), number(*biggest->b));
    summary = fmt::format("largest memory change: {} {}{}", biggest->key,
                          change_text(biggest->change(), Kind::memory),
                          pct.empty() ? "" : " (" + pct + ")");
  } else {
    summary = "no memory metric changed";
  }
  summary += fmt::format("; {} of {} keys changed, {} only in A, {} only in B", counts.changed,
                         rows.size(), counts.only_a, counts.only_b);
  return summary;
}

nlohmann::json row_json(const Row& r) {
  return {{"stage", stage_of(r.key)},
          {"key", std::string(r.key)},
          {"a", value_json(r.a)},
          {"b", value_json(r.b)},
          {"change", r.numeric_both() ? nlohmann::json(r.change()) : nullptr},
          {"change_pct", r.numeric_both() ? percent_json(number(*r.a), number(*r.b)) : nullptr}};
}

}  // namespace

bool MetricsDiff::Row::numeric_both() const noexcept {
  return kind != Kind::text && a && b;
}

double MetricsDiff::Row::change() const noexcept {
  return numeric_both() ? number(*b) - number(*a) : 0.0;
}

MetricsDiff diff_metrics(const Metrics& a, const Metrics& b, const DiffNames& names) {
  MetricsDiff out{names, metric_rows(a, b), {}};
  KeyCounts counts;
  for (const Row& r : out.rows) (void)change_cell(r, counts);
  out.summary = metrics_verdict(out.rows, counts);
  return out;
}

report::Report MetricsDiff::to_report() const {
  report::Report report;
  report.title = fmt::format("metrics: A = {}, B = {}", names.a, names.b);
  report::Table table{"keys, memory first, the largest change first",
                      {"stage", "key", "A", "B", "change", "change %"},
                      {false, false, true, true, true, true},
                      {},
                      more_note(rows.size(), names.top, "keys")};
  KeyCounts counts;
  for (const Row& r : rows) {
    if (table.rows.size() == names.top) break;
    const std::string change = change_cell(r, counts);
    const std::string pct =
        r.numeric_both() ? percent_change(number(*r.a), number(*r.b)) : std::string();
    table.rows.push_back({stage_of(r.key), std::string(r.key), text_of(r.a, r.kind),
                          text_of(r.b, r.kind), change, pct});
  }
  report.tables.push_back(std::move(table));
  report.notes.push_back(summary);
  return report;
}

nlohmann::json MetricsDiff::to_json() const {
  nlohmann::json out = diff_json("metrics", names, summary);
  nlohmann::json json_rows = nlohmann::json::array();
  for (const Row& r : rows) json_rows.push_back(row_json(r));
  out["rows"] = std::move(json_rows);
  return out;
}

}  // namespace memscope::cli
