#include "memscope/stats.hpp"

#include <array>
#include <string_view>
#include <utility>

namespace memscope {
namespace {

constexpr std::array<std::string_view, kStatPools> kPoolNames{"all", "small_pool", "large_pool"};

template <class F>
void for_each_array(MemoryStats& s, F&& f) {
  for (StatArray* a :
       {&s.allocation, &s.segment, &s.active, &s.inactive_split, &s.allocated_bytes,
        &s.reserved_bytes, &s.active_bytes, &s.inactive_split_bytes, &s.requested_bytes}) {
    for (Stat& stat : *a) f(stat);
  }
  f(s.oversize_allocations);
  f(s.oversize_segments);
}

void add_stat(std::map<std::string, std::int64_t>& out, const std::string& prefix, const Stat& s) {
  out[prefix + ".current"] = s.current;
  out[prefix + ".peak"] = s.peak;
  out[prefix + ".allocated"] = s.allocated;
  out[prefix + ".freed"] = s.freed;
}

}  // namespace

void MemoryStats::reset_peak() noexcept {
  for_each_array(*this, [](Stat& s) { s.reset_peak(); });
}

void MemoryStats::reset_accumulated() noexcept {
  for_each_array(*this, [](Stat& s) { s.reset_accumulated(); });
  num_alloc_retries = num_ooms = num_sync_all_streams = 0;
  num_device_alloc = num_device_free = num_invalid_frees = 0;
}

std::map<std::string, std::int64_t> MemoryStats::flatten() const {
  std::map<std::string, std::int64_t> out;
  const std::array<std::pair<std::string_view, const StatArray*>, 9> families{{
      {"allocation", &allocation},
      {"segment", &segment},
      {"active", &active},
      {"inactive_split", &inactive_split},
      {"allocated_bytes", &allocated_bytes},
      {"reserved_bytes", &reserved_bytes},
      {"active_bytes", &active_bytes},
      {"inactive_split_bytes", &inactive_split_bytes},
      {"requested_bytes", &requested_bytes},
  }};
  for (const auto& [name, array] : families) {
    for (std::size_t pool = 0; pool < kStatPools; ++pool) {
      add_stat(out, std::string(name) + "." + std::string(kPoolNames[pool]), (*array)[pool]);
    }
  }
  add_stat(out, "oversize_allocations", oversize_allocations);
  add_stat(out, "oversize_segments", oversize_segments);
  out["num_alloc_retries"] = num_alloc_retries;
  out["num_ooms"] = num_ooms;
  out["num_sync_all_streams"] = num_sync_all_streams;
  out["num_device_alloc"] = num_device_alloc;
  out["num_device_free"] = num_device_free;
  out["num_invalid_frees"] = num_invalid_frees;
  out["max_split_size"] = max_split_size;
  return out;
}

}  // namespace memscope
