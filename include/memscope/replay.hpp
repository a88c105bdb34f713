// Replaying a trace through memscope's allocator on a simulated device: what it would reserve,
// where the peak is and what was live there, how settings compare, and the smallest device the
// trace fits on.
//
// A ReplayPlan is the trace of one device as a sequence of allocations and frees (the starting
// live set first; the corpus README, MEMSCOPE_TRACES). Every op remembers where it came from (event
// index, stack, tag), so a replay can say what was live when. replay() runs a plan through a fresh
// allocator on a simulated device and finds its peaks; replay_trace() does the same from a
// TorchSnapshot and also names the peak's stage and the code that allocated what was live
// there. compare_settings() replays one trace with several AllocatorConfig strings;
// fit_capacity() searches the smallest capacity that replays without an out-of-memory error.
//
// Thread safety: the functions are pure apart from the allocator replay() is given (itself
// thread-safe); results are plain values.
// Errors: TraceFormatError for a trace that contradicts itself (an address allocated twice,
// freed twice) or a device with no trace; ConfigError for a settings string that does not
// parse (the message names it); UsageError for a precision or capacity of zero.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "memscope/backend.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/config.hpp"
#include "memscope/snapshot.hpp"
#include "memscope/stats.hpp"
#include "memscope/trace_events.hpp"
#include "memscope/units.hpp"

namespace memscope {

// ---- The replay sequence ------------------------------------------------------------------

inline constexpr std::uint32_t kBeforeTrace = std::numeric_limits<std::uint32_t>::max();
inline constexpr std::uint32_t kUnlinked = std::numeric_limits<std::uint32_t>::max();

struct ReplayOp {
  bool is_free = false;
  std::uint64_t addr = 0;  // the address on the recording device: identifies the allocation
  std::size_t size = 0;    // requested bytes (a free carries its allocation's)
  StreamId stream = kDefaultStream;
  // Where it came from: the event's index in the device's trace (kBeforeTrace for the starting
  // live set) and, for an alloc, the stack and tag that allocated it.
  std::uint32_t event = kBeforeTrace;
  StackId stack = 0;
  TagId tag = 0;
  // The allocation's number, unique in the plan (below ReplayPlan::allocations); a free carries
  // its alloc's. Plans built by hand may leave kUnlinked: replay() then matches by address.
  std::uint32_t slot = kUnlinked;
};

struct ReplayPlan {
  // The starting live set first ((a) then (b)), then the traced allocs and frees. An (a) op
  // carries the stack of its free (who allocated it is not known).
  std::vector<ReplayOp> ops;
  std::int64_t device = 0;
  std::size_t allocations = 0;      // alloc ops; slots run from 0 to allocations - 1
  bool linked = false;              // every op has its slot (build_replay_plan() sets it)
  std::size_t starting_frees = 0;   // (a): frees with no earlier alloc (the first ops)
  std::size_t starting_active = 0;  // (b): active blocks never allocated in the trace
  std::size_t traced_ops = 0;       // traced allocs and free_completed events
  std::size_t live_before = 0;      // requested bytes of the starting live set
  std::size_t peak_live = 0;        // highest live requested bytes during the plan
  std::size_t peak_live_op = 0;     // the first op after which live bytes are peak_live
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

// Builds the plan for one device. A trace with no segments (an RMM log) gets its starting live
// set from frees alone. Throws TraceFormatError when the device has no trace, the events
// contradict each other, or the trace holds 2^32 - 1 events or allocations or more.
[[nodiscard]] ReplayPlan build_replay_plan(const TorchSnapshot& snapshot, std::int64_t device = 0);
// The devices that have a trace (a non-empty event list), in order.
[[nodiscard]] std::vector<std::int64_t> trace_devices(const TorchSnapshot& snapshot);

// ---- Replaying through memscope -----------------------------------------------------------

struct ReplaySample {  // the allocator's counters after one op
  std::int64_t reserved_bytes = 0;
  std::int64_t allocated_bytes = 0;
  std::int64_t requested_bytes = 0;
};

// One moment of a replay: the op, the trace event it came from, and the bytes after it.
struct ReplayMoment {
  static constexpr std::size_t kNever = std::numeric_limits<std::size_t>::max();
  std::size_t op = kNever;             // index into the plan's ops; kNever: it did not happen
  std::uint32_t event = kBeforeTrace;  // index into the device's trace
  std::int64_t time_us = 0;            // the event's time (replay_trace() fills it; 0 unknown)
  std::string tag;                     // the event's tag, e.g. the tracker's stage
  std::size_t request = 0;             // the op's requested bytes
  std::int64_t reserved_bytes = 0;     // after the op
  std::int64_t live_bytes = 0;         // requested bytes live after the op

  [[nodiscard]] bool happened() const noexcept { return op != kNever; }
};

// Where a live allocation's stack comes from.
enum class SiteOrigin : std::uint8_t {
  traced,            // allocated in the trace: the stack of its alloc event
  before_recording,  // live when recording began, never freed in it: the snapshot block's stack
                     // (PyTorch records none for blocks allocated before recording began)
  freed_in_trace,    // live when recording began and freed in the trace: the stack of its free
};

// "traced", "before_recording", "freed_in_trace".
[[nodiscard]] const char* to_string(SiteOrigin origin) noexcept;

// Live allocations grouped by the stack that allocated them (or freed them, for origin
// freed_in_trace).
struct StackBytes {
  StackId stack = 0;
  SiteOrigin origin = SiteOrigin::traced;
  std::size_t bytes = 0;  // requested
  std::size_t count = 0;
};

// Where the stack of the plan's op `index` (an alloc) comes from: traced for an op of the
// trace, freed_in_trace for the plan's first starting_frees ops, else before_recording.
[[nodiscard]] SiteOrigin origin_of(const ReplayPlan& plan, std::size_t index) noexcept;

// The widest ReplaySite::where() text: longer names (C++ templates run to hundreds of
// characters) keep their start and end around a "..." in the middle.
inline constexpr std::size_t kSiteWidth = 80;

// Live allocations grouped by the frame blamed for their stacks (blamed_frame()).
struct ReplaySite {
  TraceFrame frame;  // empty filename and name: the allocations had no frames
  SiteOrigin origin = SiteOrigin::traced;
  std::size_t bytes = 0;
  std::size_t count = 0;
  // "model.py:212 forward" (the file's last path component; a C++ function without its
  // parameter list), at most kSiteWidth characters; "<no frames>"; "<allocated before
  // recording>" for blocks live when recording began whose stack is unknown; "freed at
  // model.py:212 forward (allocated before recording)" when the stack is their free's.
  [[nodiscard]] std::string where() const;
};

// What was live after one moment of a replay: totals, by stack (largest first) and, when the
// replay knew the trace's frames (replay_trace(), explain_with_trace()), by site (the top
// ReplayOptions::top_sites, largest first).
struct LiveBreakdown {
  std::size_t bytes = 0;  // requested
  std::size_t count = 0;
  std::vector<StackBytes> stacks;
  std::vector<ReplaySite> top_sites;
};

// What the allocation ops `allocations` (indices into plan.ops, each once) hold, by the stack
// that allocated them and its origin (origin_of()): totals, and stacks largest first (ties:
// smaller stack id, then origin); top_sites empty (explain_with_trace() fills it).
[[nodiscard]] LiveBreakdown live_by_stack(const ReplayPlan& plan,
                                          const std::vector<std::size_t>& allocations);

// The allocator's segments right after a replay's `peak` op (ReplayOptions::peak_layout): what
// the peak's reserved bytes were made of, taken during the replay itself.
struct PeakLayout {
  std::vector<SegmentInfo> segments;  // Snapshot::segments then, in address order
  // Each block allocated then: its address and the plan op (index into ReplayPlan::ops) whose
  // allocation it held, by address.
  std::vector<std::pair<std::uintptr_t, std::size_t>> allocated_by;

  // The op whose allocation the block at `address` held; ReplayMoment::kNever for none.
  [[nodiscard]] std::size_t op_at(std::uintptr_t address) const noexcept;
};

struct ReplayResult {
  std::int64_t device = 0;
  std::string config;          // the settings replayed (AllocatorConfig text)
  std::size_t capacity = 0;    // of the simulated device; 0 when replayed through a given allocator
  std::size_t operations = 0;  // ops replayed: starting_blocks, then the trace's events
  std::size_t starting_blocks = 0;  // blocks live when recording began (ReplayPlan)
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
  bool stopped_at_oom = false;  // ReplayOptions::stop_at_first_oom ended it early
  // Where things happened. `peak` is the first op after which reserved bytes reached
  // peak_reserved (the op that made the allocator reserve its last segment); `peak_live`
  // the first after which live requested bytes reached peak_requested.
  ReplayMoment peak;
  ReplayMoment peak_live;
  ReplayMoment first_oom;
  std::int64_t trace_start_us = 0;  // the trace's first time, for times relative to it
  // What was live at the two peaks: after the `peak_live` op (the most memory the program
  // held) and after the `peak` op (when the allocator reserved the most).
  LiveBreakdown at_peak_live;
  LiveBreakdown at_peak_reserved;
  std::chrono::nanoseconds wall_time{0};  // the allocate/deallocate calls (and sampling, if on)
  double ns_per_event = 0.0;
  MemoryStats final_stats;
  std::vector<ReplaySample> series;  // one per op, when asked for
  // Allocations still live at the end (as in the snapshot); they belong to the allocator.
  std::vector<void*> live_pointers;
  // With ReplayOptions::peak_layout, when the peak happened.
  std::optional<PeakLayout> peak_layout;

  // An aligned text report: the peaks (event, time, stage), the fragmentation figure,
  // segments, out-of-memory errors, and what was live at peak live and at peak reserved with
  // their top sites.
  [[nodiscard]] std::string explain() const;
};

struct ReplayOptions {
  AllocatorConfig config{};         // the defaults, not MEMSCOPE_ALLOC_CONF
  std::size_t capacity = 80 * GiB;  // of the simulated device
  bool record_series = false;
  bool stop_at_first_oom = false;  // end the replay at the first refused allocation
  std::size_t top_sites = 10;      // sites kept by replay_trace()
  // Keep the segments at the peak (ReplayResult::peak_layout): a snapshot of the allocator each
  // time its reserved bytes reach a new high, the last one kept. Off, the loop is the same code
  // as before it existed (a template parameter), so it costs nothing.
  bool peak_layout = false;
};

// Replays `plan` through `allocator`; its allocations at the end stay live (live_pointers).
// `peak` is located only when record_series is on (the allocator is not ours to watch).
[[nodiscard]] ReplayResult replay(const ReplayPlan& plan, CachingAllocator& allocator,
                                  bool record_series = false);
// Replays `plan` through a fresh allocator on a fresh simulated device of options.capacity;
// live_pointers is empty (the allocator is gone when this returns).
[[nodiscard]] ReplayResult replay(const ReplayPlan& plan, const ReplayOptions& options = {});
// Builds the plan of `device`, replays it, and explains it with the snapshot's times, tags and
// frames (top_sites).
[[nodiscard]] ReplayResult replay_trace(const TorchSnapshot& snapshot, std::int64_t device = 0,
                                        const ReplayOptions& options = {});
// Fills the moments' time_us and tag and the breakdowns' top_sites of a result of replaying
// `plan`, which was built from `snapshot`.
void explain_with_trace(const TorchSnapshot& snapshot, const ReplayPlan& plan, ReplayResult& result,
                        std::size_t top_sites = 10);
// Fills `live.top_sites` from its stacks: grouped by blamed frame and origin, the largest `top`.
void fill_top_sites(const TorchSnapshot& snapshot, LiveBreakdown& live, std::size_t top = 10);

// Who a stack frame belongs to, for blaming an allocation on code (docs/traces.md, "Which
// code is blamed"):
// - internal: never the answer while a stack has other frames: frames of unknown origin (a
//   file of "??" or none), the unwinder and recorders (torch::unwind, CapturedTraceback,
//   memscope::), C++ frameworks by namespace (c10::, at::, torch::, std::, pybind11:: ...),
//   the C library's start and thread entry, CPython's C API (Py*, _Py*) and `<frozen ...>`
//   modules, and, in a stack that holds Python frames, every native source frame (.c, .cpp,
//   .h, .cu, .S, .o ...), which is then the interpreter's or a framework's;
// - library: code the user calls but does not write: installed packages (site-packages,
//   dist-packages), Python's standard library, PyTorch's Python sources (a path through a
//   torch/ folder), generated code (torchinductor, torch.fx's <eval_with_key>), shared objects;
// - user: everything else (the user's scripts and modules; in a native-only stack, the
//   program's own functions).
enum class FrameKind : std::uint8_t { user, library, internal };
[[nodiscard]] FrameKind classify_frame(const TraceFrame& frame, bool python_stack = true);

// The frame to blame for a stack: its innermost frame of user code; failing that its
// innermost library frame (the library call the user made); failing that, for the framework's
// own threads (the autograd engine), the innermost autograd node (…Backward0::apply) or ATen
// operator (at::_ops::…::call); failing that its innermost frame outside the unwinder and
// allocators; failing that its innermost frame. nullptr for an empty or unknown stack.
[[nodiscard]] const TraceFrame* blamed_frame(const TraceStrings& strings, StackId stack);

// True for a frame not of user code (classify_frame() is not `user`), never blamed while its
// stack holds user code.
[[nodiscard]] bool is_plumbing_frame(const TraceFrame& frame);

// ---- Would it fit -------------------------------------------------------------------------

struct FitOptions {
  AllocatorConfig config{};
  std::size_t precision = 2 * MiB;  // capacities tried are multiples of it
  // The largest capacity tried; 0: four times the peak reserved on an unlimited device.
  std::size_t max_capacity = 0;
  // The plan replayed this many times back to back through one allocator, each time on the
  // cache the earlier ones left (what a step left live is freed between): a training loop.
  int iterations = 1;
};

// The smallest simulated device on which a plan replays without an out-of-memory error, found
// by bisection over multiples of the precision. Guarantee: the replay fits on `capacity` and
// does not on `capacity - precision` (or that is below the peak live bytes, where nothing
// fits). The allocator's behaviour is not monotonic in capacity (a smaller device flushes the
// cache at other moments, and garbage_collection_threshold and fractional memory limits scale
// with it), so a capacity below `capacity - precision` may fit as well and one above `capacity`
// may fail; every capacity tried is listed in `probes`.
struct FitResult {
  std::string config;
  bool fits = false;         // some capacity up to max_capacity fits
  std::size_t capacity = 0;  // the answer, when fits
  std::size_t precision = 0;
  std::size_t lower_bound = 0;  // the plan's peak live bytes: no smaller device can fit
  std::size_t max_capacity = 0;
  std::vector<std::pair<std::size_t, bool>> probes;  // (capacity, fits), in the order tried

  [[nodiscard]] std::string explain() const;
};

[[nodiscard]] FitResult fit_capacity(const ReplayPlan& plan, const FitOptions& options = {});

// fit_capacity()'s bisection for any replay, e.g. a model of another allocator's rules:
// `fits(capacity)` says whether it runs on a device of that many bytes. Grid points are
// multiples of `precision`; the last one below `lower_bound` is taken to fail without a call,
// and `max_capacity` (rounded up to the grid) is tried first. config is left empty.
[[nodiscard]] FitResult fit_by_bisection(std::size_t lower_bound, std::size_t max_capacity,
                                         std::size_t precision,
                                         const std::function<bool(std::size_t)>& fits);

// ---- Comparing settings -------------------------------------------------------------------

struct CompareOptions {
  std::size_t capacity = 80 * GiB;
  std::int64_t device = 0;
  bool fit = false;  // also search each setting's smallest device
  std::size_t fit_precision = 2 * MiB;
  std::size_t top_sites = 10;
};

struct ComparisonRow {
  ReplayResult replay;
  std::optional<FitResult> fit;
};

struct Comparison {
  std::vector<ComparisonRow> rows;  // one per settings string, in the order given
  // One aligned row per setting: peak reserved, peak live, their ratio, segments, retries,
  // out-of-memory errors and, when searched, the smallest device.
  [[nodiscard]] std::string table() const;
};

// Replays the trace of options.device once per AllocatorConfig string ("" is the defaults). Every
// string is parsed before any replay; the rows then run in parallel on the machine's cores
// (each its own allocator and device), with the results of running them one by one.
[[nodiscard]] Comparison compare_settings(const TorchSnapshot& snapshot,
                                          const std::vector<std::string>& configs,
                                          const CompareOptions& options = {});

}  // namespace memscope
