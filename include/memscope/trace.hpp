// Traces: reading a PyTorch memory snapshot, turning it into a replayable sequence of
// allocations and frees, and replaying that sequence through a memscope CachingAllocator.
//
// A snapshot (torch.cuda.memory._dump_snapshot) is a pickle of plain data: the allocator's
// segments and blocks at the moment of the dump, and, when history was recorded, one list of
// events per device (alloc, free_requested, free_completed, segment_alloc...). The trace usually
// starts after memory was already live, so build_replay_plan() first rebuilds that starting live
// set: (a) every free_completed whose address was not allocated earlier in the trace, (b) every
// active_allocated block whose address is never allocated in the trace. The plan allocates that
// set, then replays alloc and free_completed in order (tests/data/README.md).
//
// replay() runs a plan through an allocator on a simulated device (addresses only, no memory
// behind them) and reports the peaks, the fragmentation figure (peak reserved / peak live
// requested) and the cost per event, so allocator settings can be compared on real workloads.
//
// Thread safety: the functions are pure apart from the allocator replay() is given (which is
// itself thread-safe). Results are plain values.
// Errors: TraceFormatError for a snapshot that is not a pickle of plain data, lacks a field,
// holds a field of the wrong type, or whose events contradict each other (an address allocated
// twice, freed twice); the message names the file and the field, e.g.
// "snap.pickle: device_traces[0][17].size: expected int, found str".
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "memscope/backend.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/config.hpp"
#include "memscope/pickle.hpp"
#include "memscope/snapshot.hpp"
#include "memscope/stats.hpp"
#include "memscope/trace_events.hpp"
#include "memscope/units.hpp"

namespace memscope {

// ---- Reading ------------------------------------------------------------------------------
// The data model (TorchSnapshot, TraceEvent, frames) is in trace_events.hpp.

// Converts an unpickled snapshot; `source` names it in error messages.
[[nodiscard]] TorchSnapshot read_torch_snapshot(const PickleValue& root,
                                                std::string_view source = "<snapshot>");
[[nodiscard]] TorchSnapshot read_torch_snapshot_file(const std::filesystem::path& path);
// A snapshot written as JSON (by PyTorch's newer tools or write_torch_snapshot()).
[[nodiscard]] TorchSnapshot read_torch_snapshot_json(std::string_view json,
                                                     std::string_view source = "<snapshot>");
// RMM's allocation log (rmm::mr::logging_resource_adaptor): a CSV with the header
// Thread,Time,Action,Pointer,Size,Stream and the actions allocate, allocate failure and free.
// The result has one device trace (alloc / free_completed / oom events) and no segments.
[[nodiscard]] TorchSnapshot read_rmm_log(std::string_view csv, std::string_view source = "<log>");
// Any of the above, told apart by content (a pickle, a JSON object, an RMM CSV header).
[[nodiscard]] TorchSnapshot read_trace_file(const std::filesystem::path& path);

// ---- Writing ------------------------------------------------------------------------------

enum class SnapshotFormat { pickle, json };
// The snapshot as PyTorch writes it (torch.cuda.memory._dump_snapshot): a pickle of the given
// protocol (2 to 4; PyTorch's viewer cannot read 5), or JSON.
[[nodiscard]] std::string torch_snapshot_pickle(const TorchSnapshot& snapshot, int protocol = 4);
[[nodiscard]] std::string torch_snapshot_json(const TorchSnapshot& snapshot);
// Writes atomically (a temporary file beside `path`, then rename): an interrupted write leaves
// no partial file. The format follows the extension (.json: JSON; anything else: pickle).
void write_torch_snapshot(const TorchSnapshot& snapshot, const std::filesystem::path& path);

// ---- The replay sequence ------------------------------------------------------------------

struct ReplayOp {
  bool is_free = false;
  std::uint64_t addr = 0;  // the address on the recording device: identifies the allocation
  std::size_t size = 0;    // requested bytes
  StreamId stream = kDefaultStream;
};

struct ReplayPlan {
  std::vector<ReplayOp> ops;        // the starting live set first, then the traced allocs and frees
  std::size_t starting_frees = 0;   // (a): frees with no earlier alloc
  std::size_t starting_active = 0;  // (b): active blocks never allocated in the trace
  std::size_t traced_ops = 0;       // traced allocs and free_completed events
  std::size_t live_before = 0;      // requested bytes of the starting live set
  std::size_t peak_live = 0;        // highest live requested bytes during the plan
  std::size_t live_at_end = 0;      // live requested bytes after the last op
  std::size_t distinct_sizes = 0;   // distinct request sizes among the traced allocs
  // What the recording allocator held at the dump, on this device:
  std::size_t active_at_dump = 0;    // requested bytes of active_allocated blocks
  std::size_t reserved_at_dump = 0;  // sum of the segments' total_size
  std::size_t segments_at_dump = 0;
  std::size_t large_segments_at_dump = 0;
  std::size_t small_segments_at_dump = 0;

  [[nodiscard]] std::size_t starting_blocks() const noexcept {
    return starting_frees + starting_active;
  }
  // The check of the method: the replay ends with exactly the memory the snapshot shows.
  [[nodiscard]] bool ends_as_snapshot() const noexcept { return live_at_end == active_at_dump; }
};

// Builds the plan for one device. Throws TraceFormatError when the device has no trace or the
// events contradict each other.
[[nodiscard]] ReplayPlan build_replay_plan(const TorchSnapshot& snapshot, std::int64_t device = 0);

// ---- Replaying through memscope -----------------------------------------------------------

struct ReplaySample {  // the allocator's counters after one op
  std::int64_t reserved_bytes = 0;
  std::int64_t allocated_bytes = 0;
  std::int64_t requested_bytes = 0;
};

struct ReplayResult {
  std::size_t operations = 0;
  // Peaks during the replay (a peak window opened at its start), in bytes.
  std::int64_t peak_reserved = 0;
  std::int64_t peak_allocated = 0;
  std::int64_t peak_requested = 0;  // peak live: what the program asked for
  double reserved_over_peak_live = 0.0;
  std::int64_t peak_segments = 0;     // the allocator's segment.all.peak (its lifetime peak)
  std::int64_t num_device_alloc = 0;  // during the replay
  std::int64_t num_device_free = 0;
  std::int64_t num_alloc_retries = 0;
  std::int64_t num_ooms = 0;  // allocations that raised OutOfMemoryError (their frees are skipped)
  std::chrono::nanoseconds wall_time{0};  // the allocate/deallocate calls (and sampling, if on)
  double ns_per_event = 0.0;
  MemoryStats final_stats;
  std::vector<ReplaySample> series;  // one per op, when asked for
  // Allocations still live at the end (as in the snapshot); they belong to the allocator.
  std::vector<void*> live_pointers;
};

struct ReplayOptions {
  AllocatorConfig config{};         // the defaults, not MEMSCOPE_ALLOC_CONF
  std::size_t capacity = 80 * GiB;  // of the simulated device
  bool record_series = false;
};

// Replays `plan` through `allocator`; its allocations at the end stay live (live_pointers).
[[nodiscard]] ReplayResult replay(const ReplayPlan& plan, CachingAllocator& allocator,
                                  bool record_series = false);
// Replays `plan` through a fresh allocator on a fresh simulated device of options.capacity;
// live_pointers is empty (the allocator is gone when this returns).
[[nodiscard]] ReplayResult replay(const ReplayPlan& plan, const ReplayOptions& options = {});

}  // namespace memscope
