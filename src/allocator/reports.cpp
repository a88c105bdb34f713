#include "allocator/reports.hpp"

#include <fmt/format.h>

#include "allocator/size_rules.hpp"
#include "memscope/units.hpp"

namespace memscope::detail {
namespace {

std::string bytes(std::size_t n) {
  return format_bytes(static_cast<std::int64_t>(n));
}

struct Row {
  std::string_view label;
  const StatArray* stat;
  bool in_bytes;
};

}  // namespace

std::string format_memory_summary(const MemoryStats& s, std::string_view backend) {
  constexpr int kWidth = 88;
  const std::string rule(kWidth, '=');
  const std::string thin(kWidth, '-');
  std::string out;
  const auto line = [&out](std::string_view text) {
    out += fmt::format("|{:<{}}|\n", text, kWidth - 2);
  };
  out += rule + "\n";
  line(fmt::format(" memscope memory summary, backend {}", backend));
  line(fmt::format(" num_alloc_retries: {:<6} num_ooms: {:<6} num_sync_all_streams: {}",
                   s.num_alloc_retries, s.num_ooms, s.num_sync_all_streams));
  line(fmt::format(" num_device_alloc: {:<7} num_device_free: {:<5} num_invalid_frees: {}",
                   s.num_device_alloc, s.num_device_free, s.num_invalid_frees));
  out += thin + "\n";
  line(fmt::format(" {:<28}{:>14}{:>14}{:>14}{:>14}", "Metric", "Current", "Peak", "Total alloc",
                   "Total freed"));
  const Row rows[] = {
      {"Allocated memory", &s.allocated_bytes, true},
      {"Active memory", &s.active_bytes, true},
      {"Requested memory", &s.requested_bytes, true},
      {"Reserved memory", &s.reserved_bytes, true},
      {"Non-releasable memory", &s.inactive_split_bytes, true},
      {"Allocations", &s.allocation, false},
      {"Active allocs", &s.active, false},
      {"Reserved segments", &s.segment, false},
      {"Non-releasable allocs", &s.inactive_split, false},
  };
  const std::string_view pool_labels[] = {"", "  from small pool", "  from large pool"};
  for (const Row& row : rows) {
    out += thin + "\n";
    for (std::size_t pool = 0; pool < kStatPools; ++pool) {
      const Stat& st = (*row.stat)[pool];
      const auto cell = [&](std::int64_t v) {
        return row.in_bytes ? format_bytes(v) : fmt::format("{}", v);
      };
      line(fmt::format(" {:<28}{:>14}{:>14}{:>14}{:>14}", pool == 0 ? row.label : pool_labels[pool],
                       cell(st.current), cell(st.peak), cell(st.allocated), cell(st.freed)));
    }
  }
  out += thin + "\n";
  line(fmt::format(" {:<28}{:>14}{:>14}{:>14}{:>14}", "Oversize allocations",
                   s.oversize_allocations.current, s.oversize_allocations.peak,
                   s.oversize_allocations.allocated, s.oversize_allocations.freed));
  line(fmt::format(" {:<28}{:>14}{:>14}{:>14}{:>14}", "Oversize segments",
                   s.oversize_segments.current, s.oversize_segments.peak,
                   s.oversize_segments.allocated, s.oversize_segments.freed));
  out += rule + "\n";
  return out;
}

std::string format_oom_message(const OutOfMemoryError::Figures& f, std::string_view backend,
                               const AllocatorConfig& config) {
  const std::size_t cached = f.reserved > f.allocated ? f.reserved - f.allocated : 0;
  std::string msg = fmt::format(
      "memscope: out of memory on {}: tried to allocate {} ({} bytes). The device has {} in all "
      "and {} free; this allocator holds {} in live allocations and {} reserved but unallocated",
      backend, bytes(f.requested), f.requested, bytes(f.capacity), bytes(f.device_free),
      bytes(f.allocated), bytes(cached));
  if (f.limit < f.capacity) msg += fmt::format("; its memory limit is {}", bytes(f.limit));
  msg += ".";
  // The most useful hint first.
  if (f.requested > f.capacity) {
    msg += " The request is larger than the whole device.";
  } else if (f.limit < f.capacity && f.requested + f.allocated > f.limit &&
             f.requested + f.allocated <= f.capacity) {
    msg += " Raising memory_limit in MEMSCOPE_ALLOC_CONF would let it fit.";
  } else if (cached >= f.requested / 2 && cached > 0) {
    msg += fmt::format(
        " Reserved-but-unallocated memory is large: the cache is fragmented. Setting "
        "MEMSCOPE_ALLOC_CONF=max_split_size:{} (or lower) keeps big blocks whole and may help.",
        config.max_split_size == AllocatorConfig::kUnlimited
            ? std::string("256MiB")
            : format_size_exact(std::max(config.max_split_size / 2, kLargeBuffer)));
  } else if (f.capacity > f.device_free + f.reserved) {
    msg += fmt::format(" Other processes or allocators hold {} of the device.",
                       bytes(f.capacity - f.device_free - f.reserved));
  } else {
    msg += " Live allocations fill the device: free some, or make the request smaller.";
  }
  return msg;
}

}  // namespace memscope::detail
