// The replay sequence of tests/data/README.md: rebuild what was live when recording began,
// then replay allocs and completed frees in order. Each alloc gets a slot number and each free
// its alloc's, so the replay finds a pointer by index instead of hashing addresses.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>

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

// Everything the plan needs to know about one recorded address, in one hash lookup per event.
struct AddressState {
  std::size_t size = 0;    // requested bytes of the live allocation
  std::uint32_t slot = 0;  // its slot
  bool live = false;
  bool allocated = false;          // the trace allocates this address somewhere
  bool freed_unallocated = false;  // (a): freed before any alloc of it
};

class SlotCounter {
 public:
  std::uint32_t next(std::int64_t device) {
    if (count_ == kUnlinked) {
      throw TraceFormatError("device_traces[" + std::to_string(device) +
                             "]: more than 2^32 - 2 allocations; replay a shorter trace");
    }
    return count_++;
  }
  [[nodiscard]] std::uint32_t count() const noexcept { return count_; }

 private:
  std::uint32_t count_ = 0;
};

}  // namespace

ReplayPlan build_replay_plan(const TorchSnapshot& snapshot, std::int64_t device) {
  if (device < 0 || static_cast<std::size_t>(device) >= snapshot.device_traces.size()) {
    throw TraceFormatError("the snapshot has no trace for device " + std::to_string(device) +
                           " (record it with torch.cuda.memory._record_memory_history())");
  }
  const std::vector<TraceEvent>& trace = snapshot.device_traces[static_cast<std::size_t>(device)];
  if (trace.size() >= kBeforeTrace) {
    throw TraceFormatError("device_traces[" + std::to_string(device) + "] holds " +
                           std::to_string(trace.size()) +
                           " events; replay handles fewer than 2^32 - 1");
  }
  ReplayPlan plan;
  plan.device = device;
  SlotCounter slots;

  // Pass 1: the traced ops, and the frees with no alloc before them (a).
  std::unordered_map<std::uint64_t, AddressState> addresses;
  std::vector<std::size_t> sizes;  // of the traced allocs; distinct ones counted at the end
  std::vector<ReplayOp> starting;
  std::vector<ReplayOp> traced;
  traced.reserve(trace.size());
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const TraceEvent& e = trace[i];
    const auto event = static_cast<std::uint32_t>(i);
    if (e.action == TraceAction::alloc) {
      AddressState& a = addresses[e.addr];
      if (a.live) {
        contradiction(device, i, "alloc of address " + hex(e.addr) + ", which is already live");
      }
      a = {e.size, slots.next(device), true, true, a.freed_unallocated};
      sizes.push_back(e.size);
      traced.push_back({false, e.addr, e.size, e.stream, event, e.stack, e.tag, a.slot});
    } else if (e.action == TraceAction::free_completed) {
      AddressState& a = addresses[e.addr];
      if (!a.live) {
        if (a.allocated || a.freed_unallocated) {
          contradiction(device, i, "free of address " + hex(e.addr) + ", which is not live");
        }
        // (a): live before the recording began; who allocated it is not known.
        a.freed_unallocated = true;
        a.slot = slots.next(device);
        a.size = e.size;
        starting.push_back({false, e.addr, e.size, e.stream, kBeforeTrace, 0, 0, a.slot});
        ++plan.starting_frees;
      }
      a.live = false;
      traced.push_back({true, e.addr, a.size, e.stream, event, e.stack, e.tag, a.slot});
    }
  }

  // (b): blocks active at the dump that the trace never allocated, with their stacks.
  for (const TorchSegment& seg : snapshot.segments) {
    if (seg.device != device) continue;
    ++plan.segments_at_dump;
    ++(seg.info.small_pool ? plan.small_segments_at_dump : plan.large_segments_at_dump);
    add_bytes(plan.reserved_at_dump, seg.info.total_size,
              [] { return "the snapshot's reserved bytes"; });
    for (std::size_t i = 0; i < seg.info.blocks.size(); ++i) {
      const BlockInfo& b = seg.info.blocks[i];
      if (b.state != BlockState::active_allocated) continue;
      add_bytes(plan.active_at_dump, b.requested_size,
                [] { return "the snapshot's active bytes"; });
      const auto it = addresses.find(b.address);
      if (it != addresses.end() && it->second.allocated) continue;
      if (it != addresses.end() && it->second.freed_unallocated) {
        throw TraceFormatError("block " + hex(b.address) +
                               " is active at the dump but its only event is a free; the trace "
                               "contradicts the snapshot");
      }
      const StackId stack = i < seg.block_stacks.size() ? seg.block_stacks[i] : 0;
      starting.push_back({false, b.address, b.requested_size, seg.info.stream, kBeforeTrace, stack,
                          0, slots.next(device)});
      ++plan.starting_active;
    }
  }

  // The whole sequence and its figures. Slots make the live bytes a running sum.
  plan.traced_ops = traced.size();
  plan.allocations = slots.count();
  plan.linked = true;
  std::sort(sizes.begin(), sizes.end());
  plan.distinct_sizes =
      static_cast<std::size_t>(std::unique(sizes.begin(), sizes.end()) - sizes.begin());
  if (starting.empty()) {
    plan.ops = std::move(traced);
  } else {
    plan.ops.reserve(starting.size() + traced.size());
    plan.ops.insert(plan.ops.end(), starting.begin(), starting.end());
    plan.ops.insert(plan.ops.end(), traced.begin(), traced.end());
  }
  std::size_t now = 0;
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const ReplayOp& op = plan.ops[i];
    if (op.is_free) {
      now -= op.size;  // slots pair each free with its alloc, so this never wraps
    } else {
      add_bytes(now, op.size, [&] { return "live bytes at the alloc of " + hex(op.addr); });
      if (now > plan.peak_live) {
        plan.peak_live = now;
        plan.peak_live_op = i;
      }
    }
    if (i + 1 == starting.size()) plan.live_before = now;
  }
  plan.live_at_end = now;
  return plan;
}

std::vector<std::int64_t> trace_devices(const TorchSnapshot& snapshot) {
  std::vector<std::int64_t> devices;
  for (std::size_t d = 0; d < snapshot.device_traces.size(); ++d) {
    if (!snapshot.device_traces[d].empty()) devices.push_back(static_cast<std::int64_t>(d));
  }
  return devices;
}

}  // namespace memscope
