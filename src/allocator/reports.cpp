#include "allocator/reports.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "allocator/size_rules.hpp"
#include "memscope/units.hpp"

namespace memscope::detail {
namespace {

std::string bytes(std::size_t n) {
  return format_size(n);  // unsigned: sizes of 2^63 bytes and more are not negative
}

constexpr std::size_t kCountersPerLine = 3;

}  // namespace

std::string format_memory_summary(const MemoryStats& s, std::string_view backend) {
  constexpr int kWidth = 88;
  const std::string rule(kWidth, '=');
  const std::string thin(kWidth, '-');
  std::string out;
  const auto line = [&out](std::string_view text) {
    out += fmt::format("|{:<{}}|\n", text, kWidth - 2);
  };
  const auto row = [&line](std::string_view label, const auto& current, const auto& peak,
                           const auto& allocated, const auto& freed) {
    line(fmt::format(" {:<28}{:>14}{:>14}{:>14}{:>14}", label, current, peak, allocated, freed));
  };
  out += rule + "\n";
  line(fmt::format(" memscope memory summary, backend {}", backend));
  for (std::size_t first = 0; first < kStatCounters.size(); first += kCountersPerLine) {
    std::string text;
    const std::size_t last = std::min(first + kCountersPerLine, kStatCounters.size());
    for (std::size_t i = first; i < last; ++i) {
      const StatCounter& counter = kStatCounters[i];
      text += fmt::format(" {}: {:<{}}", counter.name, s.*counter.member, counter.summary_width);
    }
    line(text);
  }
  out += thin + "\n";
  row("Metric", "Current", "Peak", "Total alloc", "Total freed");
  const std::string_view pool_labels[kStatPools] = {"", "  from small pool", "  from large pool"};
  for (const StatFamily& family : kStatFamilies) {
    out += thin + "\n";
    const auto cell = [&family](std::int64_t v) {
      return family.in_bytes ? format_bytes(v) : fmt::format("{}", v);
    };
    for (std::size_t pool = 0; pool < kStatPools; ++pool) {
      const Stat& st = (s.*family.member)[pool];
      row(pool == 0 ? family.summary_label : pool_labels[pool], cell(st.current), cell(st.peak),
          cell(st.allocated), cell(st.freed));
    }
  }
  out += thin + "\n";
  for (const SingleStat& single : kSingleStats) {
    const Stat& st = s.*single.member;
    row(single.summary_label, st.current, st.peak, st.allocated, st.freed);
  }
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
  // The most useful hint first. Sums are compared by subtracting: sizes may be near 2^64.
  if (f.requested > f.capacity) {
    msg += " The request is larger than the whole device.";
  } else if (f.limit < f.capacity &&
             (f.allocated > f.limit || f.requested > f.limit - f.allocated) &&
             f.allocated <= f.capacity && f.requested <= f.capacity - f.allocated) {
    msg += " Raising memory_limit in MEMSCOPE_ALLOC_CONF would let it fit.";
  } else if (cached >= f.requested / 2 && cached > 0) {
    msg += fmt::format(
        " Reserved-but-unallocated memory is large: the cache is fragmented. Setting "
        "MEMSCOPE_ALLOC_CONF=max_split_size:{} (or lower) keeps big blocks whole and may help.",
        config.max_split_size == AllocatorConfig::kUnlimited
            ? std::string("256MiB")
            : format_size_exact(std::max(config.max_split_size / 2, kLargeBuffer)));
  } else if (f.device_free <= f.capacity && f.reserved < f.capacity - f.device_free) {
    msg += fmt::format(" Other processes or allocators hold {} of the device.",
                       bytes(f.capacity - f.device_free - f.reserved));
  } else {
    msg += " Live allocations fill the device: free some, or make the request smaller.";
  }
  return msg;
}

}  // namespace memscope::detail
