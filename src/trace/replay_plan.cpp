// The replay sequence of tests/data/README.md: rebuild what was live when recording began,
// then replay allocs and completed frees in order.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "memscope/errors.hpp"
#include "memscope/trace.hpp"

namespace memscope {
namespace {

std::string hex(std::uint64_t value) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(value));
  return buf;
}

[[noreturn]] void contradiction(std::int64_t device, std::size_t index, const std::string& what) {
  throw TraceFormatError("device_traces[" + std::to_string(device) + "][" + std::to_string(index) +
                         "]: " + what + "; the trace contradicts itself");
}

// Byte totals stay within what every consumer can hold (int64 statistics, signed arithmetic):
// a trace whose live bytes pass 2^63 - 1 is not a real device's, and says so.
// `what` names the total, built only when it is needed.
template <class What>
void add_bytes(std::size_t& total, std::size_t amount, What&& what) {
  constexpr auto kMax = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
  if (amount > kMax - std::min(total, kMax)) {
    throw TraceFormatError(std::string(what()) + " passes 2^63 - 1 bytes (" +
                           std::to_string(total) + " + " + std::to_string(amount) +
                           "); no device holds that much");
  }
  total += amount;
}

}  // namespace

ReplayPlan build_replay_plan(const TorchSnapshot& snapshot, std::int64_t device) {
  if (device < 0 || static_cast<std::size_t>(device) >= snapshot.device_traces.size()) {
    throw TraceFormatError("the snapshot has no trace for device " + std::to_string(device) +
                           " (record it with torch.cuda.memory._record_memory_history())");
  }
  const std::vector<TraceEvent>& trace = snapshot.device_traces[static_cast<std::size_t>(device)];
  ReplayPlan plan;

  // Pass 1: which addresses the trace allocates, and which frees have no alloc before them.
  std::unordered_map<std::uint64_t, std::size_t> live;  // addr -> requested size
  std::unordered_set<std::uint64_t> ever_allocated;
  std::unordered_set<std::uint64_t> freed_unallocated;
  std::unordered_set<std::uint64_t> sizes;
  std::vector<ReplayOp> traced;
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const TraceEvent& e = trace[i];
    if (e.action == TraceAction::alloc) {
      if (!live.emplace(e.addr, e.size).second) {
        contradiction(device, i, "alloc of address " + hex(e.addr) + ", which is already live");
      }
      ever_allocated.insert(e.addr);
      sizes.insert(e.size);
      traced.push_back({false, e.addr, e.size, e.stream});
    } else if (e.action == TraceAction::free_completed) {
      if (live.erase(e.addr) == 0) {
        if (ever_allocated.contains(e.addr) || !freed_unallocated.insert(e.addr).second) {
          contradiction(device, i, "free of address " + hex(e.addr) + ", which is not live");
        }
        // (a): live before the recording began.
        plan.ops.push_back({false, e.addr, e.size, e.stream});
        ++plan.starting_frees;
      }
      traced.push_back({true, e.addr, e.size, e.stream});
    }
  }

  // (b): blocks active at the dump that the trace never allocated.
  for (const TorchSegment& seg : snapshot.segments) {
    if (seg.device != device) continue;
    ++plan.segments_at_dump;
    ++(seg.info.small_pool ? plan.small_segments_at_dump : plan.large_segments_at_dump);
    add_bytes(plan.reserved_at_dump, seg.info.total_size,
              [] { return "the snapshot's reserved bytes"; });
    for (const BlockInfo& b : seg.info.blocks) {
      if (b.state != BlockState::active_allocated) continue;
      add_bytes(plan.active_at_dump, b.requested_size,
                [] { return "the snapshot's active bytes"; });
      if (ever_allocated.contains(b.address)) continue;
      if (freed_unallocated.contains(b.address)) {
        throw TraceFormatError("block " + hex(b.address) +
                               " is active at the dump but its only event is a free; the trace "
                               "contradicts the snapshot");
      }
      plan.ops.push_back({false, b.address, b.requested_size, seg.info.stream});
      ++plan.starting_active;
    }
  }

  // Pass 2: the figures of the whole sequence.
  for (const ReplayOp& op : plan.ops)
    add_bytes(plan.live_before, op.size, [] { return "the starting live set"; });
  plan.traced_ops = traced.size();
  plan.distinct_sizes = sizes.size();
  plan.ops.insert(plan.ops.end(), traced.begin(), traced.end());
  std::unordered_map<std::uint64_t, std::size_t> sizes_live;
  std::size_t now = 0;
  for (const ReplayOp& op : plan.ops) {
    if (op.is_free) {
      const auto it = sizes_live.find(op.addr);
      if (it == sizes_live.end()) {  // pass 1 rules this out; checked, never assumed
        throw TraceFormatError("free of " + hex(op.addr) + ", which is not live, in the plan");
      }
      now -= it->second;
      sizes_live.erase(it);
    } else {
      if (!sizes_live.emplace(op.addr, op.size).second) {
        throw TraceFormatError("alloc of " + hex(op.addr) + ", which is already live, in the plan");
      }
      add_bytes(now, op.size, [&] { return "live bytes at the alloc of " + hex(op.addr); });
      plan.peak_live = std::max(plan.peak_live, now);
    }
  }
  plan.live_at_end = now;
  return plan;
}

}  // namespace memscope
