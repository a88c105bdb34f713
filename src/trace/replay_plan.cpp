// The replay sequence of the corpus README, MEMSCOPE_TRACES: rebuild what was live when recording
// began, then replay allocs and completed frees in order. Each alloc gets a slot number and each
// free its alloc's, so the replay finds a pointer by index instead of hashing addresses.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

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
constexpr auto kMaxBytes = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());

template <class What>
void add_bytes(std::size_t& total, std::size_t amount, What&& what) {
  if (amount > kMaxBytes - std::min(total, kMaxBytes)) {
    throw TraceFormatError(std::string(what()) + " passes 2^63 - 1 bytes (" +
                           std::to_string(total) + " + " + std::to_string(amount) +
                           "); no device holds that much");
  }
  total += amount;
}

// Everything the plan needs to know about one recorded address, in one lookup per event.
struct AddressState {
  std::size_t size = 0;    // requested bytes of the live allocation
  std::uint32_t slot = 0;  // its slot
  bool live = false;
  bool allocated = false;          // the trace allocates this address somewhere
  bool freed_unallocated = false;  // (a): freed before any alloc of it
};

// Open addressing with linear probing, keyed by addresses: one multiply and, usually, one cache
// line per lookup, where std::unordered_map allocates a node per key.
template <class Value>
class FlatTable {
 public:
  FlatTable() { grow(64); }

  // The value of `key`, default-constructed when new; `inserted` says which.
  Value& at(std::uint64_t key, bool& inserted) {
    std::size_t i = home(key);
    while (used_[i] != 0) {
      if (keys_[i] == key) {
        inserted = false;
        return values_[i];
      }
      i = (i + 1) & mask_;
    }
    inserted = true;
    if (2 * (size_ + 1) > keys_.size()) {
      grow(2 * keys_.size());
      return at(key, inserted);
    }
    ++size_;
    used_[i] = 1;
    keys_[i] = key;
    return values_[i];
  }
  Value& operator[](std::uint64_t key) {
    bool inserted = false;
    return at(key, inserted);
  }
  [[nodiscard]] const Value* find(std::uint64_t key) const {
    for (std::size_t i = home(key); used_[i] != 0; i = (i + 1) & mask_) {
      if (keys_[i] == key) return &values_[i];
    }
    return nullptr;
  }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }

 private:
  [[nodiscard]] std::size_t home(std::uint64_t key) const noexcept {
    return static_cast<std::size_t>((key * 0x9e3779b97f4a7c15ULL) >> shift_);
  }
  void grow(std::size_t capacity) {
    std::vector<std::uint64_t> keys = std::move(keys_);
    std::vector<Value> values = std::move(values_);
    std::vector<std::uint8_t> used = std::move(used_);
    keys_.assign(capacity, 0);
    values_.assign(capacity, Value{});
    used_.assign(capacity, 0);
    mask_ = capacity - 1;
    shift_ = 64 - static_cast<unsigned>(std::countr_zero(capacity));
    size_ = 0;
    for (std::size_t i = 0; i < used.size(); ++i) {
      if (used[i] != 0) (*this)[keys[i]] = std::move(values[i]);
    }
  }

  std::vector<std::uint64_t> keys_;
  std::vector<Value> values_;
  std::vector<std::uint8_t> used_;
  std::size_t mask_ = 0;
  unsigned shift_ = 64;
  std::size_t size_ = 0;
};

// The number of distinct values, by an LSD radix sort (16-bit digits, passes where every value
// has the same digit skipped): sequential passes over memory, where a hash set of millions of
// random sizes misses the cache on every insert and std::sort mispredicts every compare. Small
// inputs are sorted.
std::size_t count_distinct(std::vector<std::uint64_t>& values) {
  if (values.size() < (std::size_t{1} << 16)) {  // the passes' fixed cost would dominate
    std::sort(values.begin(), values.end());
    return static_cast<std::size_t>(std::unique(values.begin(), values.end()) - values.begin());
  }
  std::vector<std::uint64_t> scratch(values.size());
  std::vector<std::size_t> offsets(std::size_t{1} << 16);
  for (unsigned shift = 0; shift < 64; shift += 16) {
    std::fill(offsets.begin(), offsets.end(), 0);
    for (const std::uint64_t v : values) ++offsets[(v >> shift) & 0xffff];
    if (std::find(offsets.begin(), offsets.end(), values.size()) != offsets.end()) continue;
    std::size_t sum = 0;
    for (std::size_t& o : offsets) sum += std::exchange(o, sum);
    for (const std::uint64_t v : values) scratch[offsets[(v >> shift) & 0xffff]++] = v;
    values.swap(scratch);
  }
  return static_cast<std::size_t>(std::unique(values.begin(), values.end()) - values.begin());
}

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

// What the passes over a trace and its snapshot build up, before they become the plan.
struct PlanParts {
  SlotCounter slots;
  FlatTable<AddressState> addresses;
  std::vector<std::uint64_t> sizes;  // of the traced allocs, to count distinct ones
  std::vector<ReplayOp> starting;    // live before the recording began: (a) and (b)
  std::vector<ReplayOp> traced;
};

const std::vector<TraceEvent>& device_trace(const TorchSnapshot& snapshot, std::int64_t device) {
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
  return trace;
}

// Pass 1: the traced ops, and the frees with no alloc before them (a).
void read_trace(const std::vector<TraceEvent>& trace, ReplayPlan& plan, PlanParts& parts) {
  const std::int64_t device = plan.device;
  parts.traced.reserve(trace.size());
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const TraceEvent& e = trace[i];
    const auto event = static_cast<std::uint32_t>(i);
    if (e.action == TraceAction::alloc) {
      AddressState& a = parts.addresses[e.addr];
      if (a.live) {
        contradiction(device, i, "alloc of address " + hex(e.addr) + ", which is already live");
      }
      a = {e.size, parts.slots.next(device), true, true, a.freed_unallocated};
      parts.sizes.push_back(e.size);
      parts.traced.push_back({false, e.addr, e.size, e.stream, event, e.stack, e.tag, a.slot});
    } else if (e.action == TraceAction::free_completed) {
      AddressState& a = parts.addresses[e.addr];
      if (!a.live) {
        if (a.allocated || a.freed_unallocated) {
          contradiction(device, i, "free of address " + hex(e.addr) + ", which is not live");
        }
        // (a): live before the recording began; who allocated it is not known, so it carries
        // the stack of its free (SiteOrigin::freed_in_trace).
        a.freed_unallocated = true;
        a.slot = parts.slots.next(device);
        a.size = e.size;
        parts.starting.push_back(
            {false, e.addr, e.size, e.stream, kBeforeTrace, e.stack, 0, a.slot});
        ++plan.starting_frees;
      }
      a.live = false;
      parts.traced.push_back({true, e.addr, a.size, e.stream, event, e.stack, e.tag, a.slot});
    }
  }
}

// (b): blocks active at the dump that the trace never allocated, with their stacks; and the
// dump's segment and byte counts.
void read_dump(const TorchSnapshot& snapshot, ReplayPlan& plan, PlanParts& parts) {
  for (const TorchSegment& seg : snapshot.segments) {
    if (seg.device != plan.device) continue;
    ++plan.segments_at_dump;
    ++(seg.info.small_pool ? plan.small_segments_at_dump : plan.large_segments_at_dump);
    add_bytes(plan.reserved_at_dump, seg.info.total_size,
              [] { return "the snapshot's reserved bytes"; });
    for (std::size_t i = 0; i < seg.info.blocks.size(); ++i) {
      const BlockInfo& b = seg.info.blocks[i];
      if (b.state != BlockState::active_allocated) continue;
      add_bytes(plan.active_at_dump, b.requested_size,
                [] { return "the snapshot's active bytes"; });
      const AddressState* known = parts.addresses.find(b.address);
      if (known != nullptr && known->allocated) continue;
      if (known != nullptr && known->freed_unallocated) {
        throw TraceFormatError("block " + hex(b.address) +
                               " is active at the dump but its only event is a free; the trace "
                               "contradicts the snapshot");
      }
      const StackId stack = i < seg.block_stacks.size() ? seg.block_stacks[i] : 0;
      parts.starting.push_back({false, b.address, b.requested_size, seg.info.stream, kBeforeTrace,
                                stack, 0, parts.slots.next(plan.device)});
      ++plan.starting_active;
    }
  }
}

// The live bytes along the plan's ops (slots make them a running sum): before the trace, at
// the peak and at the end.
void add_live_bytes(ReplayPlan& plan, std::size_t starting_ops) {
  std::size_t now = 0;
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const ReplayOp& op = plan.ops[i];
    if (op.is_free) {
      now -= op.size;  // slots pair each free with its alloc, so this never wraps
    } else {
      if (op.size > kMaxBytes - now) [[unlikely]] {  // add_bytes() says why, out of the loop
        add_bytes(now, op.size, [&] { return "live bytes at the alloc of " + hex(op.addr); });
      }
      now += op.size;
      if (now > plan.peak_live) {
        plan.peak_live = now;
        plan.peak_live_op = i;
      }
    }
    if (i + 1 == starting_ops) plan.live_before = now;
  }
  plan.live_at_end = now;
}

}  // namespace

ReplayPlan build_replay_plan(const TorchSnapshot& snapshot, std::int64_t device) {
  const std::vector<TraceEvent>& trace = device_trace(snapshot, device);
  ReplayPlan plan;
  plan.device = device;
  PlanParts parts;
  read_trace(trace, plan, parts);
  read_dump(snapshot, plan, parts);

  // The whole sequence and its figures.
  plan.traced_ops = parts.traced.size();
  plan.allocations = parts.slots.count();
  plan.linked = true;
  plan.distinct_sizes = count_distinct(parts.sizes);
  if (parts.starting.empty()) {
    plan.ops = std::move(parts.traced);
  } else {
    plan.ops.reserve(parts.starting.size() + parts.traced.size());
    plan.ops.insert(plan.ops.end(), parts.starting.begin(), parts.starting.end());
    plan.ops.insert(plan.ops.end(), parts.traced.begin(), parts.traced.end());
  }
  add_live_bytes(plan, parts.starting.size());
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
