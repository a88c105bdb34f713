// The reduction of per-rank metrics and its text and JSON forms: pure functions, no MPI calls,
// so gather() and the tests share one definition of min/max/argmax/missing.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "memscope/mpi.hpp"

namespace memscope::mpi {

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

}  // namespace

std::string RankTable::format() const {
  std::size_t width = 3;
  for (const auto& [key, r] : reductions) width = std::max(width, key.size());
  std::string out =
      fmt::format("memscope: {} metrics over {} ranks\n", reductions.size(), world_size);
  out += fmt::format("  {:<{}}  {:>16}  {:>16}  {:>6}  {:>16}  {:>16}  {}\n", "key", width, "min",
                     "max", "argmax", "mean", "sum", "missing on ranks");
  for (const auto& [key, r] : reductions) {
    out += fmt::format("  {:<{}}  {:>16}  {:>16}  {:>6}  {:>16}  {:>16}  {}\n", key, width,
                       number(r.min), number(r.max), r.argmax, number(r.mean), number(r.sum),
                       r.missing.empty() ? "-" : fmt::to_string(fmt::join(r.missing, ",")));
  }
  if (world_size > 16) return out;  // a column per rank stops being readable
  out += fmt::format("  {:<{}}", "per rank", width);
  for (int rank = 0; rank < world_size; ++rank) out += fmt::format("  {:>16}", rank);
  out += '\n';
  for (const auto& [key, r] : reductions) {
    out += fmt::format("  {:<{}}", key, width);
    for (const auto& values : ranks) {
      const auto it = values.find(key);
      out += fmt::format("  {:>16}", it == values.end() ? "missing" : number(it->second));
    }
    out += '\n';
  }
  return out;
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

}  // namespace memscope::mpi
