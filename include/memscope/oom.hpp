// Explaining an out-of-memory error from a trace that recorded it: a PyTorch snapshot dumped at
// the OOM (the `oom` action of a device trace, with `device_free`), or memscope's own recording
// (CachingAllocator::recorded_snapshot(), which records the same action).
//
// explain_oom() says what the allocator held at that moment (reserved, allocated, cached free,
// the largest free block: from the snapshot's segments, which are the allocator's state at the
// OOM when the snapshot was dumped there), what was live by allocation site and by tag (the
// tracker's stage or PyTorch's user_metadata: the categories of the memory), and answers
// counterfactuals by replaying the recorded window, up to and including the refused request, on
// a simulated device of the capacity the allocator could reach (its reserved bytes plus the
// device's free bytes at the OOM): would expandable segments, a max_split_size or a
// garbage_collection_threshold have fitted, and by how many bytes the window must shrink to fit
// with the settings it ran with. to_report() is the one rendering of all this (text, JSON and
// the page through report_text/json/html.hpp); a live job adds what only it can see (the
// device's total, other processes, memory outside the allocator) before rendering.
//
// The replay runs memscope's allocator, which follows PyTorch's rules (docs/size-rules.md) but
// sees only the recorded window: when it does not run out of memory with the job's own
// settings, the explanation says so instead of claiming a counterfactual.
//
// Thread safety: pure functions of plain values. Errors: TraceFormatError for a device without
// the OOM asked for, or a damaged OOM record (a request of 0 bytes, device_free beyond any
// device), naming `OomOptions::source` and the event; ConfigError never (settings the trace
// names that memscope cannot parse are replaced by the defaults, and a note says so).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "memscope/replay.hpp"
#include "memscope/report.hpp"
#include "memscope/trace_events.hpp"
#include "memscope/units.hpp"

namespace memscope {

// The OOM events of one device's trace, as indices into it, in order.
[[nodiscard]] std::vector<std::size_t> find_ooms(const TorchSnapshot& snapshot,
                                                 std::int64_t device);
// The devices whose traces hold an OOM event, in order.
[[nodiscard]] std::vector<std::int64_t> devices_with_ooms(const TorchSnapshot& snapshot);

struct OomOptions {
  std::size_t which = 0;  // the OOM to explain: 0 the first of the device, 1 the second...
  // The simulated device's capacity; 0: reserved at the OOM + the device's free bytes then.
  std::size_t capacity = 0;
  std::size_t top_sites = 10;
  bool counterfactuals = true;
  std::size_t precision = 2 * MiB;  // of the "must shrink by" search
  std::string source = "<trace>";   // names the trace in errors
};

// One settings string replayed on the window.
struct OomCounterfactual {
  std::string label;   // "expandable_segments:True"
  std::string config;  // the full AllocatorConfig text replayed
  bool fits = false;   // the window, the refused request included, replays without an OOM
  std::int64_t peak_reserved = 0;
};

struct OomExplanation {
  std::int64_t device = 0;
  std::size_t event = 0;      // index of the OOM in the device's trace
  std::size_t oom_count = 0;  // OOM events on the device
  std::uint64_t request = 0;
  std::uint64_t device_free = 0;    // what the device had free, as the allocator saw it
  std::int64_t time_us = 0;         // 0: the trace has no times
  std::int64_t trace_start_us = 0;  // the trace's first time, for "t+1.234 s"
  std::string tag;                  // the event's tag (stage), if any
  std::string request_site;         // the blamed frame of the refused request, if recorded

  // The allocator at the OOM (from the snapshot's segments of this device).
  bool has_segments = false;    // false: an RMM log or a snapshot without segments
  bool segments_at_oom = true;  // false: allocations or segment changes followed the OOM, so
                                // the segment figures below are those at the dump
  std::size_t reserved = 0;     // at the OOM (segment events after it are undone)
  std::size_t allocated = 0;    // bytes of active blocks (rounded), from the segments
  std::size_t cached_free = 0;  // inactive blocks: reserved but free
  std::size_t largest_free_block = 0;
  std::size_t segments = 0;
  std::size_t live_requested = 0;  // requested bytes live at the OOM (from the events)

  // What was live at the OOM: by site (top_sites) and by tag (largest first).
  LiveBreakdown live;
  std::vector<std::pair<std::string, std::size_t>> by_tag;

  // Filled by a live job (memscope.torch.watch); 0 / empty when unknown.
  std::size_t device_total = 0;
  std::size_t other_processes = 0;    // bytes other processes hold on the device
  std::size_t outside_allocator = 0;  // this process's device memory minus reserved
  std::string live_source;            // what measured them ("NVML", "torch.cuda")

  // The counterfactuals, on a simulated device of `capacity`.
  std::size_t capacity = 0;
  std::string settings;  // the job's settings as replayed (AllocatorConfig text)
  std::vector<OomCounterfactual> counterfactuals;  // [0] is the job's own settings
  std::size_t window_peak_live = 0;                // requested bytes: no allocator fits below it
  // The smallest device the window fits on with the job's settings (0: not searched or none
  // up to 4x the capacity), and what the window must shrink by to fit on `capacity`.
  std::size_t fits_on = 0;
  std::size_t shrink_by = 0;
  std::vector<std::string> notes;

  // True when the replay with the job's own settings also ran out of memory: the
  // counterfactuals answer the question the job asked.
  [[nodiscard]] bool reproduced() const noexcept {
    return !counterfactuals.empty() && !counterfactuals.front().fits;
  }
  // The one rendering: a summary, the live sites and tags, the counterfactuals, the notes.
  // `title` heads it ("Out of memory on cuda:0").
  [[nodiscard]] report::Report to_report(const std::string& title = {}) const;
  // render_text(to_report()).
  [[nodiscard]] std::string explain() const;
};

[[nodiscard]] OomExplanation explain_oom(const TorchSnapshot& snapshot, std::int64_t device,
                                         const OomOptions& options = {});

}  // namespace memscope
