// explain_oom() (oom.hpp): the allocator's state at a recorded OOM, what was live there, and the
// counterfactual replays of the recorded window on a simulated device of the capacity the job
// could reach.
#include <fmt/core.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/text.hpp"
#include "memscope/config.hpp"
#include "memscope/errors.hpp"
#include "memscope/oom.hpp"
#include "memscope/report_text.hpp"
#include "memscope/trace.hpp"

namespace memscope {
namespace {

using detail::group_digits;

// No device holds a pebibyte: a device_free above it is a damaged record, not a device.
constexpr std::uint64_t kMostDeviceBytes = std::uint64_t{1} << 50;

const std::vector<TraceEvent>& events_of(const TorchSnapshot& snapshot, std::int64_t device) {
  static const std::vector<TraceEvent> kNone;
  if (device < 0 || static_cast<std::size_t>(device) >= snapshot.device_traces.size()) return kNone;
  return snapshot.device_traces[static_cast<std::size_t>(device)];
}

[[noreturn]] void damaged(const OomOptions& o, std::int64_t device, std::size_t event,
                          const std::string& problem) {
  throw TraceFormatError(fmt::format("{}: device_traces[{}][{}] (the out-of-memory record): {}",
                                     o.source, device, event, problem));
}

// The allocator's segments of `device` at the dump, and `reserved` moved back to the OOM by
// undoing the segment events after it.
void read_segments(const TorchSnapshot& snapshot, const std::vector<TraceEvent>& trace,
                   OomExplanation& x) {
  for (const TorchSegment& s : snapshot.segments) {
    if (s.device != x.device) continue;
    x.has_segments = true;
    ++x.segments;
    x.reserved += s.info.total_size;
    for (const BlockInfo& b : s.info.blocks) {
      if (b.state == BlockState::inactive) {
        x.cached_free += b.size;
        x.largest_free_block = std::max(x.largest_free_block, b.size);
      } else {
        x.allocated += b.size;
      }
    }
  }
  std::int64_t undo = 0;  // reserved bytes the events after the OOM added
  for (std::size_t j = x.event + 1; j < trace.size(); ++j) {
    const TraceEvent& e = trace[j];
    const auto bytes = static_cast<std::int64_t>(e.size);
    switch (e.action) {
      case TraceAction::segment_alloc:
      case TraceAction::segment_map:
        undo += bytes;
        x.segments_at_oom = false;
        break;
      case TraceAction::segment_free:
      case TraceAction::segment_unmap:
        undo -= bytes;
        x.segments_at_oom = false;
        break;
      case TraceAction::alloc:
      case TraceAction::free_completed:
        x.segments_at_oom = false;
        break;
      default:
        break;
    }
  }
  const std::int64_t at_oom = static_cast<std::int64_t>(x.reserved) - undo;
  x.reserved = at_oom > 0 ? static_cast<std::size_t>(at_oom) : 0;
}

// The plan's ops up to the OOM, then the refused request: the window the counterfactuals replay.
// Also fills what was live at the OOM.
ReplayPlan window_of(const TorchSnapshot& snapshot, const ReplayPlan& plan, const TraceEvent& oom,
                     OomExplanation& x, std::size_t top_sites) {
  ReplayPlan w;
  w.device = plan.device;
  w.linked = true;
  w.starting_frees = plan.starting_frees;
  w.starting_active = plan.starting_active;
  std::vector<std::uint8_t> freed(plan.allocations + 1, 0);
  std::size_t live = 0;
  for (const ReplayOp& op : plan.ops) {
    if (op.event != kBeforeTrace && op.event >= x.event) break;  // ops are in event order
    w.ops.push_back(op);
    if (op.is_free) {
      if (freed[op.slot] == 0) live -= std::min(live, op.size);
      freed[op.slot] = 1;
    } else {
      live += op.size;
    }
    if (live > w.peak_live) {
      w.peak_live = live;
      w.peak_live_op = w.ops.size() - 1;
    }
  }
  std::vector<std::size_t> live_ops;
  std::map<std::string, std::size_t> tags;
  for (std::size_t i = 0; i < w.ops.size(); ++i) {
    const ReplayOp& op = w.ops[i];
    if (op.is_free || freed[op.slot] != 0) continue;
    live_ops.push_back(i);
    tags[op.tag < snapshot.strings.tags.size() ? snapshot.strings.tags[op.tag] : ""] += op.size;
  }
  x.live = live_by_stack(w, live_ops);
  fill_top_sites(snapshot, x.live, top_sites);
  x.live_requested = x.live.bytes;
  for (auto& [tag, bytes] : tags) x.by_tag.emplace_back(tag.empty() ? "(no tag)" : tag, bytes);
  std::stable_sort(x.by_tag.begin(), x.by_tag.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });

  ReplayOp request;
  request.size = oom.size;
  request.addr = ~std::uint64_t{0};  // no address: it was never handed out
  request.stream = oom.stream;
  request.event = static_cast<std::uint32_t>(x.event);
  request.stack = oom.stack;
  request.tag = oom.tag;
  request.slot = static_cast<std::uint32_t>(plan.allocations);
  w.ops.push_back(request);
  w.allocations = plan.allocations + 1;
  live += oom.size;
  if (live > w.peak_live) {
    w.peak_live = live;
    w.peak_live_op = w.ops.size() - 1;
  }
  w.live_at_end = live;
  w.traced_ops = w.ops.size() - std::min(w.ops.size(), plan.starting_blocks());
  return w;
}

OomCounterfactual try_settings(const ReplayPlan& window, const AllocatorConfig& config,
                               std::string label, std::size_t capacity) {
  ReplayOptions o;
  o.config = config;
  o.capacity = capacity;
  o.stop_at_first_oom = true;
  const ReplayResult r = replay(window, o);
  return {std::move(label), config.to_string(), r.num_ooms == 0, r.peak_reserved};
}

void run_counterfactuals(const TorchSnapshot& snapshot, const ReplayPlan& window,
                         const OomOptions& options, OomExplanation& x) {
  AllocatorConfig job;
  try {
    job = AllocatorConfig::parse(snapshot.settings);
  } catch (const ConfigError& e) {
    x.notes.push_back(fmt::format(
        "The trace's allocator settings '{}' are not memscope's ({}); the defaults were replayed.",
        snapshot.settings, e.what()));
  }
  // The capacity is what the job could reach, its memory limit included; the replay records
  // nothing.
  job.memory_fraction = 1.0;
  job.memory_limit_bytes = 0;
  job.record_history = 0;
  job.record_cpp_stacks = false;
  job.record_python_stacks = false;
  x.settings = job.to_string();
  x.counterfactuals.push_back(try_settings(
      window, job, x.settings.empty() ? "the job's settings (defaults)" : "the job's settings",
      x.capacity));
  if (!job.expandable_segments) {
    AllocatorConfig c = job;
    c.expandable_segments = true;
    x.counterfactuals.push_back(try_settings(window, c, "expandable_segments:True", x.capacity));
  }
  if (job.max_split_size == AllocatorConfig::kUnlimited && !job.expandable_segments) {
    for (const std::size_t mib : {std::size_t{32}, std::size_t{128}, std::size_t{512}}) {
      AllocatorConfig c = job;
      c.max_split_size = mib * MiB;
      x.counterfactuals.push_back(
          try_settings(window, c, fmt::format("max_split_size_mb:{}", mib), x.capacity));
    }
  }
  if (job.garbage_collection_threshold == 0.0) {
    AllocatorConfig c = job;
    c.garbage_collection_threshold = 0.8;
    x.counterfactuals.push_back(
        try_settings(window, c, "garbage_collection_threshold:0.8", x.capacity));
  }
  if (!x.reproduced()) {
    x.notes.push_back(fmt::format(
        "memscope's allocator replays the recorded window with the job's settings on {} without "
        "running out of memory: the OOM came from memory the window does not show (allocations "
        "before a ring that dropped events, another allocator or pool), so the rows above say "
        "nothing about it.",
        format_size(x.capacity)));
    return;
  }
  FitOptions f;
  f.config = job;
  f.precision = options.precision;
  f.max_capacity = std::max<std::size_t>(4 * x.capacity, window.peak_live + options.precision);
  const FitResult fit = fit_capacity(window, f);
  if (fit.fits) {
    x.fits_on = fit.capacity;
    x.shrink_by = fit.capacity > x.capacity ? fit.capacity - x.capacity : 0;
  }
}

std::string when_text(const OomExplanation& x, std::int64_t start_us) {
  std::string out = "event " + group_digits(x.event);
  if (x.time_us != 0 && start_us != 0) {
    out += fmt::format(" (t+{:.3f} s)", static_cast<double>(x.time_us - start_us) / 1e6);
  }
  if (!x.tag.empty()) out += ", stage '" + x.tag + "'";
  if (x.oom_count > 1) out += fmt::format(" ({} out-of-memory events in the trace)", x.oom_count);
  return out;
}

std::string verdict(const OomExplanation& x) {
  if (x.counterfactuals.empty()) return {};
  if (!x.reproduced()) return "not reproduced by the replay of the recorded window (see notes)";
  std::vector<std::string> fitting;
  for (std::size_t i = 1; i < x.counterfactuals.size(); ++i) {
    if (x.counterfactuals[i].fits) fitting.push_back(x.counterfactuals[i].label);
  }
  std::string out;
  if (!fitting.empty()) {
    out = "would have fitted with ";
    for (std::size_t i = 0; i < fitting.size(); ++i) {
      out += (i == 0 ? "" : i + 1 == fitting.size() ? " or " : ", ") + fitting[i];
    }
    out += "; ";
  } else {
    out = "no setting tried fits; ";
  }
  if (x.shrink_by > 0) {
    out += fmt::format("with the job's settings the step must shrink by {} (it fits on {})",
                       format_size(x.shrink_by), format_size(x.fits_on));
  } else if (x.window_peak_live > x.capacity) {
    out += fmt::format("the live bytes alone ({}) exceed the {} the job could reach",
                       format_size(x.window_peak_live), format_size(x.capacity));
  } else {
    out += fmt::format("no device up to {} fits it with the job's settings",
                       format_size(4 * x.capacity));
  }
  return out;
}

}  // namespace

std::vector<std::size_t> find_ooms(const TorchSnapshot& snapshot, std::int64_t device) {
  std::vector<std::size_t> out;
  const std::vector<TraceEvent>& trace = events_of(snapshot, device);
  for (std::size_t i = 0; i < trace.size(); ++i) {
    if (trace[i].action == TraceAction::oom) out.push_back(i);
  }
  return out;
}

std::vector<std::int64_t> devices_with_ooms(const TorchSnapshot& snapshot) {
  std::vector<std::int64_t> out;
  for (std::size_t d = 0; d < snapshot.device_traces.size(); ++d) {
    if (!find_ooms(snapshot, static_cast<std::int64_t>(d)).empty()) {
      out.push_back(static_cast<std::int64_t>(d));
    }
  }
  return out;
}

OomExplanation explain_oom(const TorchSnapshot& snapshot, std::int64_t device,
                           const OomOptions& options) {
  const std::vector<std::size_t> ooms = find_ooms(snapshot, device);
  if (options.which >= ooms.size()) {
    throw TraceFormatError(fmt::format(
        "{}: device {} has {} out-of-memory event{} (action 'oom' in device_traces[{}]); asked "
        "for number {}",
        options.source, device, ooms.size(), ooms.size() == 1 ? "" : "s", device,
        options.which + 1));
  }
  const std::vector<TraceEvent>& trace = events_of(snapshot, device);
  OomExplanation x;
  x.device = device;
  x.event = ooms[options.which];
  x.oom_count = ooms.size();
  for (const std::size_t i : ooms) {  // every record of the device, not only the one asked for
    if (trace[i].size == 0) {
      damaged(options, device, i,
              "the request is 0 bytes, and no allocator refuses nothing (the 'size' field holds "
              "the bytes asked for)");
    }
    if (trace[i].addr > kMostDeviceBytes) {
      damaged(options, device, i,
              fmt::format("device_free is {} bytes, more than any device holds", trace[i].addr));
    }
  }
  const TraceEvent& oom = trace[x.event];
  x.request = oom.size;
  x.device_free = oom.addr;
  x.time_us = oom.time_us;
  for (const TraceEvent& e : trace) {
    if (e.time_us != 0) {
      x.trace_start_us = e.time_us;
      break;
    }
  }
  x.tag = oom.tag < snapshot.strings.tags.size() ? snapshot.strings.tags[oom.tag] : "";
  if (const TraceFrame* f = blamed_frame(snapshot.strings, oom.stack)) {
    ReplaySite site;
    site.frame = *f;
    x.request_site = site.where();
  }
  read_segments(snapshot, trace, x);

  const ReplayPlan plan = build_replay_plan(snapshot, device);
  const ReplayPlan window = window_of(snapshot, plan, oom, x, options.top_sites);
  x.window_peak_live = window.peak_live;
  if (!x.has_segments) x.reserved = x.live_requested;  // no segments: what was live, at least
  x.capacity = options.capacity != 0 ? options.capacity : x.reserved + x.device_free;
  if (x.capacity == 0) x.capacity = x.request;  // nothing known: the request alone
  if (!x.segments_at_oom) {
    x.notes.push_back(
        "Events follow the OOM in this trace: allocated, cached free and the largest free block "
        "are the segments' at the dump; reserved is moved back to the OOM through the segment "
        "events.");
  }
  if (snapshot.dropped_events != 0) {
    x.notes.push_back(fmt::format(
        "The recorder's ring dropped {} older events: the window replayed starts from the live "
        "set its first event implies.",
        group_digits(snapshot.dropped_events)));
  }
  if (options.counterfactuals) run_counterfactuals(snapshot, window, options, x);
  return x;
}

report::Report OomExplanation::to_report(const std::string& title) const {
  report::Report r;
  r.title = title.empty() ? fmt::format("Out of memory on device {}", device) : title;
  auto& s = r.summary;
  std::string request_text = format_size(request);
  if (!request_site.empty()) request_text += " at " + request_site;
  s.emplace_back("request", request_text);
  s.emplace_back("when", when_text(*this, trace_start_us));
  if (has_segments) {
    s.emplace_back("reserved", fmt::format("{} in {} segment{}",
                                           format_bytes(static_cast<std::int64_t>(reserved)),
                                           segments, segments == 1 ? "" : "s"));
    s.emplace_back("allocated", format_bytes(static_cast<std::int64_t>(allocated)));
    s.emplace_back("cached free",
                   fmt::format("{}, largest free block {}",
                               format_bytes(static_cast<std::int64_t>(cached_free)),
                               format_bytes(static_cast<std::int64_t>(largest_free_block))));
  }
  s.emplace_back(
      "live (requested)",
      fmt::format("{} in {} allocations", format_bytes(static_cast<std::int64_t>(live_requested)),
                  group_digits(live.count)));
  s.emplace_back("device free", format_bytes(static_cast<std::int64_t>(device_free)));
  if (device_total != 0) {
    const std::string by = live_source.empty() ? "" : " (" + live_source + ")";
    s.emplace_back("device total", format_bytes(static_cast<std::int64_t>(device_total)) + by);
    s.emplace_back("other processes", format_bytes(static_cast<std::int64_t>(other_processes)));
    s.emplace_back("outside the allocator",
                   format_bytes(static_cast<std::int64_t>(outside_allocator)) +
                       " (this process's device memory minus reserved: CUDA context, NCCL, "
                       "cuBLAS)");
  }
  if (!counterfactuals.empty()) {
    s.emplace_back("replayed on", fmt::format("a simulated device of {} (reserved + device free)",
                                              format_size(capacity)));
    s.emplace_back("verdict", verdict(*this));
  }

  report::TextTable sites({{"where"}, {"bytes", true}, {"count", true}});
  for (const ReplaySite& site : live.top_sites) {
    sites.add_row({site.where(), format_bytes(static_cast<std::int64_t>(site.bytes)),
                   group_digits(site.count)});
  }
  report::Table t = sites.table();
  t.title = "Live at the OOM, by site";
  r.tables.push_back(std::move(t));

  report::TextTable tags({{"tag"}, {"bytes", true}});
  for (const auto& [tag, bytes] : by_tag) {
    tags.add_row({tag, format_bytes(static_cast<std::int64_t>(bytes))});
  }
  t = tags.table();
  t.title = "Live at the OOM, by tag (stage)";
  r.tables.push_back(std::move(t));

  if (!counterfactuals.empty()) {
    report::TextTable rows({{"settings"}, {"fits"}, {"peak reserved", true}});
    for (const OomCounterfactual& c : counterfactuals) {
      rows.add_row({c.label, c.fits ? "yes" : "no",
                    c.fits ? format_bytes(c.peak_reserved) : std::string("-")});
    }
    t = rows.table();
    t.title = fmt::format(
        "Would the step have fitted on {}? (the recorded window replayed, the "
        "refused request included)",
        format_size(capacity));
    t.note = fmt::format("No allocator fits below the window's peak live bytes, {}.",
                         format_size(window_peak_live));
    r.tables.push_back(std::move(t));
  }
  r.notes = notes;
  return r;
}

std::string OomExplanation::explain() const {
  return report::render_text(to_report());
}

}  // namespace memscope
