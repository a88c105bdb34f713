#include "memscope/stats.hpp"

#include <string>

namespace memscope {
namespace {

// Calls f on every Stat of `s`: each pool of each family, then the single statistics.
template <class F>
void for_each_stat(MemoryStats& s, F&& f) {
  for (const StatFamily& family : kStatFamilies) {
    for (Stat& stat : s.*family.member) f(stat);
  }
  for (const SingleStat& single : kSingleStats) f(s.*single.member);
}

void add_stat(std::map<std::string, std::int64_t>& out, const std::string& prefix, const Stat& s) {
  for (const StatField& field : kStatFields) {
    out[prefix + "." + std::string(field.name)] = s.*field.member;
  }
}

}  // namespace

void MemoryStats::reset_peak() noexcept {
  for_each_stat(*this, [](Stat& s) { s.reset_peak(); });
}

void MemoryStats::reset_accumulated() noexcept {
  for_each_stat(*this, [](Stat& s) { s.reset_accumulated(); });
  for (const StatCounter& counter : kStatCounters) this->*counter.member = 0;
}

std::map<std::string, std::int64_t> MemoryStats::flatten() const {
  std::map<std::string, std::int64_t> out;
  for (const StatFamily& family : kStatFamilies) {
    for (std::size_t pool = 0; pool < kStatPools; ++pool) {
      add_stat(out, std::string(family.name) + "." + std::string(kStatPoolNames[pool]),
               (this->*family.member)[pool]);
    }
  }
  for (const SingleStat& single : kSingleStats) {
    add_stat(out, std::string(single.name), this->*single.member);
  }
  for (const StatCounter& counter : kStatCounters) {
    out[std::string(counter.name)] = this->*counter.member;
  }
  out["max_split_size"] = max_split_size;
  return out;
}

}  // namespace memscope
