// The gather's wire format (include/memscope/rank_payload.hpp): the key table and the float64
// row, one definition for memscope::mpi and memscope.distributed.
#include "memscope/rank_payload.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>
#include <utility>

#include "memscope/errors.hpp"

namespace memscope {

namespace {

constexpr std::size_t kFlagBits = 52;                   // int flags per float64 word, all exact
constexpr std::int64_t kExact = std::int64_t{1} << 53;  // float64 holds every integer to here

std::size_t flag_words(std::size_t keys) {
  return (keys + kFlagBits - 1) / kFlagBits;
}

// A flag word as sent: a whole number below 2^52; anything else (a row from a rank whose table
// disagrees) flags nothing rather than converting out of range.
std::uint64_t flag_word(double v) {
  return v >= 0 && v < static_cast<double>(std::uint64_t{1} << kFlagBits)
             ? static_cast<std::uint64_t>(v)
             : 0;
}

}  // namespace

RankMetrics numeric_metrics(const Metrics& metrics) {
  RankMetrics numbers;
  for (const auto& [key, value] : metrics) {
    if (const auto* i = std::get_if<std::int64_t>(&value)) {
      numbers.emplace(key, *i);
    } else if (const auto* d = std::get_if<double>(&value)) {
      numbers.emplace(key, *d);
    }
  }
  return numbers;
}

std::map<std::string, double> as_doubles(const RankMetrics& metrics) {
  std::map<std::string, double> out;
  for (const auto& [key, value] : metrics) {
    out.emplace(key, std::visit([](auto v) { return static_cast<double>(v); }, value));
  }
  return out;
}

void check_rank_metrics(const RankMetrics& metrics, std::string_view caller) {
  for (const auto& [key, value] : metrics) {
    if (const auto* d = std::get_if<double>(&value); d != nullptr && std::isnan(*d)) {
      throw UsageError(fmt::format(
          "{}: metric '{}' is NaN, which marks a missing key in the payload; leave the key out "
          "instead",
          caller, key));
    }
    if (const auto* i = std::get_if<std::int64_t>(&value);
        i != nullptr && (*i > kExact || *i < -kExact)) {
      throw UsageError(fmt::format(
          "{}: metric '{}' is an integer beyond 2**53, where float64 stops being exact; pass "
          "it as a float to accept rounding",
          caller, key));
    }
    if (const auto nul = key.find('\0'); nul != std::string::npos) {
      // The key is shown up to the NUL: a C string (what()) would end there anyway.
      throw UsageError(fmt::format(
          "{}: metric key '{}\\0...' holds a NUL character, which separates keys in the key "
          "table; rename it",
          caller, key.substr(0, nul)));
    }
  }
}

std::string key_blob(const RankMetrics& metrics) {
  std::string blob;
  for (const auto& [key, value] : metrics) (blob += key) += '\0';
  return blob;
}

std::vector<std::string> agree_table(const std::vector<std::string>& table,
                                     std::string_view blobs) {
  std::set<std::string> keys(table.begin(), table.end());
  for (std::size_t end = blobs.find('\0'); end != std::string_view::npos; end = blobs.find('\0')) {
    keys.emplace(blobs.substr(0, end));
    blobs.remove_prefix(end + 1);
  }
  return {keys.begin(), keys.end()};
}

std::size_t payload_width(std::size_t keys) {
  return 1 + keys + flag_words(keys);
}

std::vector<double> encode_payload(const std::vector<std::string>& table,
                                   const RankMetrics& metrics, std::string_view caller) {
  check_rank_metrics(metrics, caller);
  std::vector<double> row(payload_width(table.size()), std::numeric_limits<double>::quiet_NaN());
  std::vector<std::uint64_t> flags(flag_words(table.size()), 0);
  std::size_t placed = 0;
  for (std::size_t i = 0; i < table.size(); ++i) {
    const auto it = metrics.find(table[i]);
    if (it == metrics.end()) continue;
    row[1 + i] = std::visit([](auto v) { return static_cast<double>(v); }, it->second);
    if (std::holds_alternative<std::int64_t>(it->second)) {
      flags[i / kFlagBits] |= std::uint64_t{1} << (i % kFlagBits);
    }
    ++placed;
  }
  row[0] = placed == metrics.size() ? 1.0 : 0.0;
  for (std::size_t w = 0; w < flags.size(); ++w) {
    row[1 + table.size() + w] = static_cast<double>(flags[w]);
  }
  return row;
}

bool payload_fits(std::span<const double> rows, std::size_t keys) {
  const std::size_t width = payload_width(keys);
  for (std::size_t at = 0; at < rows.size(); at += width) {
    if (rows[at] != 1.0) return false;
  }
  return true;
}

std::vector<RankMetrics> decode_payload(std::span<const double> rows,
                                        const std::vector<std::string>& table) {
  const std::size_t width = payload_width(table.size());
  if (rows.size() % width != 0) {
    throw UsageError(fmt::format(
        "memscope: a gathered payload of {} values is not whole rows of {} (a table of {} keys): "
        "the ranks' key tables disagree (were gathers on this group called in different "
        "orders?)",
        rows.size(), width, table.size()));
  }
  std::vector<RankMetrics> ranks(rows.size() / width);
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const auto row = rows.subspan(r * width, width);
    for (std::size_t i = 0; i < table.size(); ++i) {
      const double v = row[1 + i];
      if (std::isnan(v)) continue;
      const auto word = flag_word(row[1 + table.size() + i / kFlagBits]);
      const bool integral = std::fabs(v) <= static_cast<double>(kExact);
      if (integral && (word >> (i % kFlagBits) & 1U) != 0) {
        ranks[r].emplace(table[i], static_cast<std::int64_t>(v));
      } else {
        ranks[r].emplace(table[i], v);
      }
    }
  }
  return ranks;
}

}  // namespace memscope
