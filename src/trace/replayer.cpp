// Replays a plan through a CachingAllocator and measures it.
#include <chrono>
#include <memory>
#include <unordered_map>

#include "memscope/simulated_backend.hpp"
#include "memscope/trace.hpp"

namespace memscope {

ReplayResult replay(const ReplayPlan& plan, CachingAllocator& allocator, bool record_series) {
  constexpr auto kAll = static_cast<std::size_t>(StatPool::all);
  ReplayResult result;
  result.operations = plan.ops.size();
  if (record_series) result.series.reserve(plan.ops.size());
  // Recorded address -> our pointer. nullptr marks an allocation that failed (OOM) or was of
  // zero bytes: its free is skipped.
  std::unordered_map<std::uint64_t, void*> pointers;
  pointers.reserve(plan.ops.size());
  const MemoryStats before = allocator.stats();
  PeakScope window = allocator.peak_scope();

  const auto start = std::chrono::steady_clock::now();
  for (const ReplayOp& op : plan.ops) {
    if (op.is_free) {
      const auto it = pointers.find(op.addr);
      if (it != pointers.end()) {
        allocator.deallocate(it->second);
        pointers.erase(it);
      }
    } else {
      void* p = nullptr;
      try {
        p = allocator.allocate(op.size, op.stream);
      } catch (const OutOfMemoryError&) {
        ++result.num_ooms;  // the allocator stays usable; the replay goes on without this block
      }
      pointers[op.addr] = p;
    }
    if (record_series) {
      const MemoryStats s = allocator.stats();
      result.series.push_back({s.reserved_bytes[kAll].current, s.allocated_bytes[kAll].current,
                               s.requested_bytes[kAll].current});
    }
  }
  result.wall_time = std::chrono::steady_clock::now() - start;
  window.close();

  const PeakValues peak = window.peak();
  result.peak_reserved = peak.reserved_bytes;
  result.peak_allocated = peak.allocated_bytes;
  result.peak_requested = peak.requested_bytes;
  result.reserved_over_peak_live =
      peak.requested_bytes > 0
          ? static_cast<double>(peak.reserved_bytes) / static_cast<double>(peak.requested_bytes)
          : 0.0;
  result.final_stats = allocator.stats();
  result.peak_segments = result.final_stats.segment[kAll].peak;
  result.num_device_alloc = result.final_stats.num_device_alloc - before.num_device_alloc;
  result.num_device_free = result.final_stats.num_device_free - before.num_device_free;
  result.num_alloc_retries = result.final_stats.num_alloc_retries - before.num_alloc_retries;
  result.ns_per_event = plan.ops.empty() ? 0.0
                                         : static_cast<double>(result.wall_time.count()) /
                                               static_cast<double>(plan.ops.size());
  for (const auto& [addr, p] : pointers) {
    if (p != nullptr) result.live_pointers.push_back(p);
  }
  return result;
}

ReplayResult replay(const ReplayPlan& plan, const ReplayOptions& options) {
  CachingAllocator allocator(std::make_shared<SimulatedBackend>(options.capacity), options.config);
  ReplayResult result = replay(plan, allocator, options.record_series);
  result.live_pointers.clear();  // they die with the allocator
  return result;
}

}  // namespace memscope
