// Replays a plan through a CachingAllocator and measures it: peaks, where they happened, and
// what was live at the peak.
//
// The loop is the hot part: a pointer per slot (an array, no hashing), one running sum of live
// bytes, and, on a simulated device of our own, a backend wrapper that notes the op at which
// reserved bytes peak (segments are reserved rarely, so this costs one store per op). What was
// live at the peak is found afterwards, from the plan alone, in one pass over its ops. The segments
// at the peak (ReplayOptions::peak_layout) are a snapshot after each op that raised the reserved
// peak: a loop of its own (a template parameter), so a replay that does not ask pays nothing.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "memscope/errors.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/trace.hpp"
#include "watched_backend.hpp"

namespace memscope {
namespace {

constexpr auto kAll = static_cast<std::size_t>(StatPool::all);

// A hand-built plan (no slots) with slots: frees matched to the live alloc of their address,
// frees of nothing pointed at a slot that is never allocated, so they are skipped as before.
ReplayPlan linked_copy(const ReplayPlan& plan) {
  ReplayPlan out = plan;
  std::unordered_map<std::uint64_t, std::pair<std::uint32_t, std::size_t>> live;
  std::uint32_t next = 0;
  for (ReplayOp& op : out.ops) {
    if (!op.is_free) {
      op.slot = next++;
      live[op.addr] = {op.slot, op.size};
    } else if (const auto it = live.find(op.addr); it != live.end()) {
      op.slot = it->second.first;
      op.size = it->second.second;
      live.erase(it);
    } else {
      op.slot = kUnlinked;  // resolved below to the spare slot
    }
  }
  for (ReplayOp& op : out.ops) {
    if (op.slot == kUnlinked) op.slot = next;
  }
  out.allocations = static_cast<std::size_t>(next) + 1;  // + the spare, never allocated
  out.linked = true;
  return out;
}

// The moments found by the loop, before the plan pass adds what was live.
struct LoopState {
  std::vector<void*> pointers;  // per slot; kept after the free, so a pass can tell success
  std::size_t ops_run = 0;
  // kPeakLayout: the segments after the last op that raised the reserved peak, and that op.
  std::vector<SegmentInfo> layout;
  std::size_t layout_op = ReplayMoment::kNever;
};

// kPeakLayout (ReplayOptions::peak_layout): after an op during which the watch saw reserved bytes
// reach a new high, the allocator's segments are the peak's so far; the last such is the peak's.
template <bool kPeakLayout, class Watch>
LoopState run_loop(const ReplayPlan& plan, CachingAllocator& allocator, Watch& watch,
                   ReplayResult& result, bool record_series, bool stop_at_first_oom) {
  LoopState state;
  const auto note_layout = [&]([[maybe_unused]] std::size_t op) {
    if constexpr (kPeakLayout) {
      if (watch.peak_op() == op) {
        state.layout = allocator.snapshot().segments;
        state.layout_op = op;
      }
    }
  };
  state.pointers.assign(plan.allocations, nullptr);
  void** const pointers = state.pointers.data();
  std::int64_t live = 0;
  std::int64_t best_live = -1;
  const std::size_t n = plan.ops.size();
  const ReplayOp* const ops = plan.ops.data();
  std::size_t i = 0;
  for (; i < n; ++i) {
    const ReplayOp& op = ops[i];
    watch.at(i);
    if (op.is_free) {
      void* p = pointers[op.slot];
      if (p != nullptr) {
        allocator.deallocate(p);
        live -= static_cast<std::int64_t>(op.size);
      }
    } else {
      // nullptr when refused: past the device's capacity most ops may be, and an exception
      // each cost more than the rest of the replay (issue 44).
      void* const p = allocator.try_allocate(op.size, op.stream);
      if (p == nullptr && op.size != 0) {  // 0 bytes: nullptr, as allocate() gives them
        // The allocator stays usable; the replay goes on without this block.
        if (result.num_ooms++ == 0) {
          result.first_oom.op = i;
          result.first_oom.reserved_bytes = watch.reserved();
          result.first_oom.live_bytes = live;
        }
        if (stop_at_first_oom) {
          result.stopped_at_oom = true;
          note_layout(i);
          break;
        }
      }
      pointers[op.slot] = p;
      if (p != nullptr) {
        live += static_cast<std::int64_t>(op.size);
        if (live > best_live) {
          best_live = live;
          result.peak_live.op = i;
          result.peak_live.reserved_bytes = watch.reserved();
        }
      }
    }
    if (record_series) [[unlikely]] {
      const CachingAllocator::CurrentBytes now = allocator.current_bytes();  // O(1) in streams
      result.series.push_back({now.reserved, now.allocated, now.requested});
    }
    note_layout(i);
  }
  state.ops_run = i == n ? n : i + 1;
  result.peak_live.live_bytes = std::max<std::int64_t>(best_live, 0);
  return state;
}

// No watch: the allocator and its backend are the caller's.
struct NoWatch {
  void at(std::size_t /*op*/) noexcept {}
  [[nodiscard]] static std::int64_t reserved() noexcept { return -1; }
};

// Fills a moment's event and request from its op.
void locate(const ReplayPlan& plan, ReplayMoment& m) {
  if (!m.happened() || m.op >= plan.ops.size()) return;
  m.event = plan.ops[m.op].event;
  m.request = plan.ops[m.op].size;
}

// The allocation ops live after op `end - 1`, given which slots were freed by then.
std::vector<std::size_t> live_after(const ReplayPlan& plan, const LoopState& state,
                                    const std::vector<std::uint8_t>& freed, std::size_t end) {
  std::vector<std::size_t> live;
  for (std::size_t i = 0; i < end; ++i) {
    const ReplayOp& op = plan.ops[i];
    if (op.is_free || freed[op.slot] != 0 || state.pointers[op.slot] == nullptr) continue;
    live.push_back(i);
  }
  return live;
}

// The layout kept at the peak, each allocated block named by its op: a slot's pointer stays
// after its free, so the live ops' pointers are their blocks' addresses at the peak.
PeakLayout layout_at_peak(const ReplayPlan& plan, const LoopState& state,
                          const std::vector<std::size_t>& live) {
  PeakLayout out;
  out.segments = state.layout;
  out.allocated_by.reserve(live.size());
  for (const std::size_t i : live) {
    out.allocated_by.emplace_back(
        reinterpret_cast<std::uintptr_t>(state.pointers[plan.ops[i].slot]), i);
  }
  std::sort(out.allocated_by.begin(), out.allocated_by.end());
  return out;
}

// One pass over the plan: what was live after the peak-live op and the reserved-peak op (by
// stack), and at the end.
void collect_live(const ReplayPlan& plan, const LoopState& state, ReplayResult& result,
                  bool keep_pointers) {
  std::vector<std::uint8_t> freed(plan.allocations, 0);
  for (std::size_t i = 0; i < state.ops_run; ++i) {
    const ReplayOp& op = plan.ops[i];
    if (op.is_free) freed[op.slot] = 1;
    if (i == result.peak_live.op) {
      result.at_peak_live = live_by_stack(plan, live_after(plan, state, freed, i + 1));
    }
    if (i == result.peak.op) {
      const std::vector<std::size_t> live = live_after(plan, state, freed, i + 1);
      result.at_peak_reserved = live_by_stack(plan, live);
      if (state.layout_op == i) result.peak_layout = layout_at_peak(plan, state, live);
    }
  }
  if (result.peak.happened()) {
    result.peak.live_bytes = static_cast<std::int64_t>(result.at_peak_reserved.bytes);
  }
  if (keep_pointers) {
    for (std::size_t slot = 0; slot < plan.allocations; ++slot) {
      if (freed[slot] == 0 && state.pointers[slot] != nullptr) {
        result.live_pointers.push_back(state.pointers[slot]);
      }
    }
  }
}

template <bool kPeakLayout, class Watch>
ReplayResult run(const ReplayPlan& given, CachingAllocator& allocator, Watch& watch,
                 bool record_series, bool stop_at_first_oom, bool keep_pointers) {
  const ReplayPlan* plan = &given;
  ReplayPlan relinked;
  if (!given.linked) {
    relinked = linked_copy(given);
    plan = &relinked;
  }
  ReplayResult result;
  result.device = plan->device;
  result.config = allocator.config().to_string();
  result.operations = plan->ops.size();
  result.starting_blocks = plan->starting_blocks();
  if (record_series) result.series.reserve(plan->ops.size());
  const MemoryStats before = allocator.stats();
  PeakScope window = allocator.peak_scope();

  const auto start = std::chrono::steady_clock::now();
  const LoopState state =
      run_loop<kPeakLayout>(*plan, allocator, watch, result, record_series, stop_at_first_oom);
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
  result.ns_per_event = plan->ops.empty() ? 0.0
                                          : static_cast<double>(result.wall_time.count()) /
                                                static_cast<double>(plan->ops.size());

  // The reserved peak: from the watch, else from the series, else unknown.
  if (watch.peak_op() != ReplayMoment::kNever) {
    result.peak.op = watch.peak_op();
  } else if (!result.series.empty()) {
    for (std::size_t i = 0; i < result.series.size(); ++i) {
      if (result.series[i].reserved_bytes == peak.reserved_bytes) {
        result.peak.op = i;
        break;
      }
    }
  }
  if (result.peak.happened()) result.peak.reserved_bytes = peak.reserved_bytes;
  locate(*plan, result.peak);
  locate(*plan, result.peak_live);
  locate(*plan, result.first_oom);
  collect_live(*plan, state, result, keep_pointers);
  return result;
}

struct NoWatchPeak : NoWatch {
  [[nodiscard]] static std::size_t peak_op() noexcept { return ReplayMoment::kNever; }
};

}  // namespace

std::size_t PeakLayout::op_at(std::uintptr_t address) const noexcept {
  const auto it = std::lower_bound(allocated_by.begin(), allocated_by.end(),
                                   std::pair<std::uintptr_t, std::size_t>{address, 0});
  return it != allocated_by.end() && it->first == address ? it->second : ReplayMoment::kNever;
}

SiteOrigin origin_of(const ReplayPlan& plan, std::size_t index) noexcept {
  if (index >= plan.ops.size() || plan.ops[index].event != kBeforeTrace) return SiteOrigin::traced;
  return index < plan.starting_frees ? SiteOrigin::freed_in_trace : SiteOrigin::before_recording;
}

ReplayResult replay(const ReplayPlan& plan, CachingAllocator& allocator, bool record_series) {
  NoWatchPeak watch;
  return run<false>(plan, allocator, watch, record_series, false, true);
}

ReplayResult replay(const ReplayPlan& plan, const ReplayOptions& options) {
  auto backend = std::make_shared<WatchedBackend>(options.capacity);
  CachingAllocator allocator(backend, options.config);
  ReplayResult result = options.peak_layout
                            ? run<true>(plan, allocator, *backend, options.record_series,
                                        options.stop_at_first_oom, false)
                            : run<false>(plan, allocator, *backend, options.record_series,
                                         options.stop_at_first_oom, false);
  result.capacity = options.capacity;
  return result;
}

}  // namespace memscope
