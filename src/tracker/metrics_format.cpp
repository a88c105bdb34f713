// metrics_format, format_metrics_table and log_metrics: metric values as aligned text.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <vector>

#include "memscope/metrics.hpp"

namespace memscope {

MetricUnit metric_unit(std::string_view key) noexcept {
  const auto has = [key](std::string_view part) {
    return key.find(part) != std::string_view::npos;
  };
  if (has("_mem_")) return MetricUnit::memory;
  if (has("_runtime")) return MetricUnit::seconds;
  if (key == "total_flos" || key.ends_with("_flos")) return MetricUnit::flops;
  if (has("_memscope_") || key.ends_with("_delta") || key.ends_with("_bytes")) {
    return MetricUnit::bytes;
  }
  return MetricUnit::number;
}

bool is_memory_key(std::string_view key) noexcept {
  const MetricUnit unit = metric_unit(key);
  return unit == MetricUnit::memory || unit == MetricUnit::bytes;
}

namespace {

// A text value is shown as it is, whatever its key says.
MetricUnit unit_of(std::string_view key, const MetricValue& value) {
  return std::holds_alternative<std::string>(value) ? MetricUnit::number : metric_unit(key);
}

double as_double(const MetricValue& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  return std::get<double>(v);
}
std::int64_t as_int(const MetricValue& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return *i;
  return static_cast<std::int64_t>(std::get<double>(v));
}

struct ColumnUnit {
  const char* name;
  double scale;
};

// One binary unit for the whole column, so the decimal points line up: the largest unit the
// biggest value reaches, then smaller ones while the smallest non-zero value would show under
// 1.00 and the biggest stays under 10,000 (1.5 GiB beside 100 MiB prints as 1536.00 and
// 100.00 MiB, not 1.50 and 0.10 GiB).
ColumnUnit memory_unit(double max_abs, double min_nonzero_abs) {
  constexpr ColumnUnit units[] = {{"TiB", 1099511627776.0},
                                  {"GiB", 1073741824.0},
                                  {"MiB", 1048576.0},
                                  {"KiB", 1024.0},
                                  {"B", 1.0}};
  std::size_t i = 0;
  while (i + 1 < std::size(units) && max_abs < units[i].scale) ++i;
  while (i + 1 < std::size(units) && min_nonzero_abs < units[i].scale &&
         max_abs < 10000 * units[i + 1].scale) {
    ++i;
  }
  return units[i];
}

ColumnUnit flops_unit(double max_abs) {
  return max_abs >= 1e12 ? ColumnUnit{"TFLOP", 1e12} : ColumnUnit{"GFLOP", 1e9};
}

// Python's str(round(v, 4)), which is what the Trainer prints for floats.
std::string python_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  double rounded = std::round(v * 1e4) / 1e4;
  std::string s = fmt::format("{}", rounded);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

// The Trainer's _secs2timedelta: "H:MM:SS.cc" (datetime.timedelta's str plus centiseconds).
std::string timedelta(double secs) {
  auto whole = static_cast<std::int64_t>(secs);
  auto centis = static_cast<std::int64_t>(std::fabs(secs - static_cast<double>(whole)) * 100);
  std::int64_t days = whole / 86400;
  std::int64_t rest = whole % 86400;
  std::string day_part;
  if (days != 0) day_part = fmt::format("{} day{}, ", days, std::llabs(days) == 1 ? "" : "s");
  return fmt::format("{}{}:{:02}:{:02}.{:02}", day_part, rest / 3600, rest / 60 % 60, rest % 60,
                     centis);
}

std::string block_of(std::string_view key) {
  if (key.starts_with("before_init_")) return "init";
  auto underscore = key.find('_');
  return underscore == std::string_view::npos ? std::string()
                                              : std::string(key.substr(0, underscore));
}

}  // namespace

std::map<std::string, std::string> metrics_format(const Metrics& metrics,
                                                  const FormatOptions& options) {
  double max_memory = 0;
  double min_memory = std::numeric_limits<double>::infinity();  // smallest non-zero
  double max_flops = 0;
  for (const auto& [key, value] : metrics) {
    const MetricUnit c = unit_of(key, value);
    if (c == MetricUnit::memory || c == MetricUnit::bytes) {
      const double v = std::fabs(as_double(value));
      max_memory = std::max(max_memory, v);
      if (v > 0) min_memory = std::min(min_memory, v);
    }
    if (c == MetricUnit::flops) max_flops = std::max(max_flops, std::fabs(as_double(value)));
  }
  const ColumnUnit mem = memory_unit(max_memory, min_memory);
  const ColumnUnit flop = flops_unit(max_flops);

  std::map<std::string, std::string> out;
  for (const auto& [key, value] : metrics) {
    std::string text;
    const MetricUnit unit = unit_of(key, value);
    switch (options.trainer_compat && unit == MetricUnit::bytes ? MetricUnit::number : unit) {
      case MetricUnit::memory:
      case MetricUnit::bytes:
        if (options.trainer_compat) {
          text = fmt::format("{}MB", as_int(value) >> 20);  // the Trainer's f"{v >> 20}MB"
        } else if (mem.scale == 1.0) {
          text = fmt::format("{} B", as_int(value));
        } else {
          text = fmt::format("{:.2f} {}", as_double(value) / mem.scale, mem.name);
        }
        break;
      case MetricUnit::seconds:
        text = timedelta(as_double(value));
        break;
      case MetricUnit::flops:
        text = options.trainer_compat
                   ? fmt::format("{}GF", as_int(value) >> 30)
                   : fmt::format("{:.2f} {}", as_double(value) / flop.scale, flop.name);
        break;
      case MetricUnit::number:
        if (const auto* s = std::get_if<std::string>(&value)) {
          text = *s;
        } else if (const auto* i = std::get_if<std::int64_t>(&value)) {
          text = fmt::format("{}", *i);
        } else {
          text = python_float(std::get<double>(value));
        }
        break;
    }
    out.emplace(key, std::move(text));
  }
  return out;
}

std::string format_metrics_table(std::string_view split, const Metrics& metrics,
                                 const FormatOptions& options, const MetricNotes& notes) {
  std::map<std::string, std::string> formatted = metrics_format(metrics, options);
  std::size_t key_width = 0;
  std::size_t value_width = 0;
  for (const auto& [key, text] : formatted) {
    key_width = std::max(key_width, key.size());
    // Only numbers set the column's width: one long text (a source's "unavailable: ..."
    // reason) would otherwise push every number far to the right.
    const auto value = metrics.find(key);
    if (!std::holds_alternative<std::string>(value->second)) {
      value_width = std::max(value_width, text.size());
    }
  }
  // Blocks: keys without a stage first, then init (it happened first), then by name; keys
  // inside a block sorted, which puts alloc_delta before peaked_delta.
  std::map<std::string, std::vector<const std::string*>> blocks;
  for (const auto& [key, text] : formatted) blocks[block_of(key)].push_back(&key);
  std::vector<std::string> order;
  if (blocks.contains("")) order.emplace_back("");
  if (blocks.contains("init")) order.emplace_back("init");
  for (const auto& [name, keys] : blocks) {
    if (!name.empty() && name != "init") order.push_back(name);
  }

  std::string table = fmt::format("***** {} metrics *****\n", split);
  bool first = true;
  for (const std::string& name : order) {
    if (!first) table += '\n';
    first = false;
    for (const std::string* key : blocks[name]) {
      const bool text = std::holds_alternative<std::string>(metrics.find(*key)->second);
      table += fmt::format("  {:<{}} = {:>{}}\n", *key, key_width, formatted[*key],
                           text ? 0 : value_width);
    }
  }
  if (!notes.empty()) {
    table += "\n  notes:\n";
    for (const auto& [label, note] : notes) table += fmt::format("    {}: {}\n", label, note);
  }
  return table;
}

void log_metrics(std::string_view split, const Metrics& metrics, std::FILE* out,
                 const FormatOptions& options, const MetricNotes& notes) {
  std::string table = format_metrics_table(split, metrics, options, notes);
  std::fwrite(table.data(), 1, table.size(), out);
  std::fflush(out);
}

}  // namespace memscope
