// The reduction of per-rank metrics and its text and JSON forms (include/memscope/rank_table.hpp):
// pure functions, no MPI, so memscope::mpi, memscope.distributed and the tests share one
// definition of min/max/argmax/missing and one layout.
#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "memscope/metrics.hpp"
#include "memscope/rank_table.hpp"
#include "memscope/report.hpp"
#include "memscope/report_text.hpp"
#include "memscope/units.hpp"

namespace memscope {

RankTable reduce(std::vector<std::map<std::string, double>> ranks) {
  RankTable table;
  table.world_size = static_cast<int>(ranks.size());
  std::set<std::string> keys;
  for (const auto& rank : ranks) {
    for (const auto& [key, value] : rank) keys.insert(key);
  }
  for (const auto& key : keys) {
    Reduction r;
    for (int rank = 0; rank < table.world_size; ++rank) {
      const auto& values = ranks[static_cast<std::size_t>(rank)];
      const auto it = values.find(key);
      if (it == values.end()) {
        r.missing.push_back(rank);
        continue;
      }
      const double v = it->second;
      // Strictly greater: among equal maxima the lowest rank (seen first) stays argmax.
      if (r.count == 0 || v > r.max) {
        r.max = v;
        r.argmax = rank;
      }
      if (r.count == 0 || v < r.min) r.min = v;
      r.sum += v;
      ++r.count;
    }
    r.mean = r.sum / r.count;  // count >= 1: the key came from some rank
    table.reductions.emplace(key, std::move(r));
  }
  table.ranks = std::move(ranks);
  return table;
}

namespace {

// Byte counts and other integers print exactly; fractions (runtimes, means) with 6 digits.
std::string number(double v) {
  if (std::isfinite(v) && v == std::trunc(v) && std::fabs(v) < 9.007199254740992e15) {
    return fmt::format("{:.0f}", v);
  }
  return fmt::format("{:.6g}", v);
}

// Integral values (byte counts) as JSON integers, as Python's to_dict() writes its ints.
nlohmann::json json_number(double v) {
  if (!std::isfinite(v)) return nullptr;
  if (v == std::trunc(v) && std::fabs(v) <= 9.007199254740992e15) {
    return static_cast<std::int64_t>(v);
  }
  return v;
}

std::string cell(std::string_view key, double v) {
  if (is_memory_key(key) && std::isfinite(v) && std::fabs(v) < 9.2e18) {
    return format_bytes(std::llround(v));
  }
  return number(v);
}

// [1, 2, 3, 7] -> "1-3,7": short even when many ranks miss a key; "-" for none.
std::string ranks_text(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += i == j ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out.empty() ? "-" : out;
}

}  // namespace

std::string RankTable::format() const {
  report::Table table;
  table.columns = {"key", "min", "max", "argmax", "mean", "sum", "missing"};
  table.numeric = {false, true, true, true, true, true, true};
  for (const auto& [key, r] : reductions) {
    table.rows.push_back({key, cell(key, r.min), cell(key, r.max), std::to_string(r.argmax),
                          cell(key, r.mean), cell(key, r.sum), ranks_text(r.missing)});
  }
  return fmt::format("memscope: {} metrics over {} ranks\n", reductions.size(), world_size) +
         report::render_text(table, {.rule = false});
}

std::string RankTable::to_json() const {
  nlohmann::json out;
  out["world_size"] = world_size;
  out["ranks"] = nlohmann::json::array();
  for (const auto& values : ranks) {
    nlohmann::json rank = nlohmann::json::object();
    for (const auto& [key, v] : values) rank[key] = json_number(v);
    out["ranks"].push_back(std::move(rank));
  }
  out["reductions"] = nlohmann::json::object();
  for (const auto& [key, r] : reductions) {
    // mean stays a float, as in Python.
    out["reductions"][key] = {{"min", json_number(r.min)},
                              {"max", json_number(r.max)},
                              {"mean", std::isfinite(r.mean) ? nlohmann::json(r.mean) : nullptr},
                              {"sum", json_number(r.sum)},
                              {"argmax", r.argmax},
                              {"count", r.count},
                              {"missing", r.missing}};
  }
  return out.dump();
}

}  // namespace memscope
