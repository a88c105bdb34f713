// The results of replaying a memscope.Trace: ReplayResult (the peak, where it is, what was live
// there) with its ReplayMoment, ReplaySite and LiveBreakdown, FitResult (the smallest device)
// and Comparison (settings side by side). Plain values, read only.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "memscope/trace.hpp"

namespace memscope::python {
namespace {

void bind_moment(nb::module_& m) {
  nb::class_<ReplayMoment>(m, "ReplayMoment",
                           "One moment of a replay: the op, the trace event it came from, the "
                           "bytes after it.")
      .def_ro("op", &ReplayMoment::op, "Index into the replay's operations.")
      .def_prop_ro(
          "event",
          [](const ReplayMoment& x) -> std::optional<std::uint32_t> {
            if (x.event == kBeforeTrace) return std::nullopt;
            return x.event;
          },
          "Index of the event in the device's trace; None for the live set the trace began with.")
      .def_ro("time_us", &ReplayMoment::time_us, "The event's time (0 when unknown).")
      .def_ro("tag", &ReplayMoment::tag,
              "The event's tag: the tracker's stage, PyTorch's "
              "user_metadata.")
      .def_ro("request", &ReplayMoment::request, "The op's requested bytes.")
      .def_ro("reserved_bytes", &ReplayMoment::reserved_bytes)
      .def_ro("live_bytes", &ReplayMoment::live_bytes)
      .def("__repr__", [](const ReplayMoment& x) {
        // Numbered by event, as the text, JSON and HTML reports number moments.
        return std::string("<memscope.ReplayMoment ") +
               (x.event == kBeforeTrace ? std::string("the starting live set")
                                        : "event " + format_count(x.event)) +
               (x.tag.empty() ? std::string() : ", tag '" + x.tag + "'") + ">";
      });
}

void bind_site(nb::module_& m) {
  nb::class_<ReplaySite>(m, "ReplaySite",
                         "Live allocations grouped by the innermost frame of user code.")
      .def_prop_ro("filename", [](const ReplaySite& s) { return s.frame.filename; })
      .def_prop_ro("line", [](const ReplaySite& s) { return s.frame.line; })
      .def_prop_ro("name", [](const ReplaySite& s) { return s.frame.name; })
      .def_prop_ro("where", &ReplaySite::where,
                   "\"model.py:212 forward\" (at most 80 characters), \"<no frames>\", "
                   "\"<allocated before recording>\" or \"freed at ... (allocated before "
                   "recording)\".")
      .def_prop_ro(
          "origin", [](const ReplaySite& s) { return to_string(s.origin); },
          "'traced' (the stack of the alloc), 'before_recording' (live when recording began: "
          "the snapshot's stack, often none) or 'freed_in_trace' (live when recording began: "
          "the stack of its free).")
      .def_ro("bytes", &ReplaySite::bytes)
      .def_ro("count", &ReplaySite::count)
      .def("__repr__", [](const ReplaySite& s) {
        return "<memscope.ReplaySite " + s.where() + ": " + format_size(s.bytes) + " in " +
               std::to_string(s.count) + ">";
      });
}

void bind_breakdown(nb::module_& m) {
  nb::class_<LiveBreakdown>(m, "LiveBreakdown", "What was live after one moment of a replay.")
      .def_ro("bytes", &LiveBreakdown::bytes, "Requested bytes live.")
      .def_ro("count", &LiveBreakdown::count, "Allocations live.")
      .def_ro("top_sites", &LiveBreakdown::top_sites, "By the code blamed, largest first.")
      .def("__repr__", [](const LiveBreakdown& b) {
        return "<memscope.LiveBreakdown " + format_size(b.bytes) + " in " +
               std::to_string(b.count) + " allocations>";
      });
}

// ReplayResult's figures: what was replayed, the peaks and the device calls.
void def_replay_figures(nb::class_<ReplayResult>& cls) {
  cls.def_ro("device", &ReplayResult::device)
      .def_ro("config", &ReplayResult::config)
      .def_ro("capacity", &ReplayResult::capacity)
      .def_ro("operations", &ReplayResult::operations,
              "Ops replayed: starting_blocks, then the trace's allocations and frees.")
      .def_ro("starting_blocks", &ReplayResult::starting_blocks,
              "Blocks live when recording began (the starting live set).")
      .def_ro("peak_reserved", &ReplayResult::peak_reserved)
      .def_ro("peak_allocated", &ReplayResult::peak_allocated)
      .def_prop_ro(
          "peak_live", [](const ReplayResult& r) { return r.peak_requested; },
          "Peak live requested bytes: what the program asked for.")
      .def_ro("reserved_over_peak_live", &ReplayResult::reserved_over_peak_live)
      .def_prop_ro(
          "segments", [](const ReplayResult& r) { return r.peak_segments; },
          "Segments held at most.")
      .def_prop_ro("retries", [](const ReplayResult& r) { return r.num_alloc_retries; })
      .def_prop_ro("ooms", [](const ReplayResult& r) { return r.num_ooms; })
      .def_prop_ro("oom", [](const ReplayResult& r) { return r.num_ooms > 0; })
      .def_ro("num_device_alloc", &ReplayResult::num_device_alloc)
      .def_ro("num_device_free", &ReplayResult::num_device_free);
}

// ReplayResult's moments and what was live at them, the series and the report.
void def_replay_moments(nb::class_<ReplayResult>& cls) {
  cls.def_ro("peak", &ReplayResult::peak, "Where reserved bytes first reached their peak.")
      .def_prop_ro(
          "live_peak", [](const ReplayResult& r) { return r.peak_live; },
          "Where live bytes first reached their peak.")
      .def_prop_ro(
          "first_oom",
          [](const ReplayResult& r) -> std::optional<ReplayMoment> {
            if (!r.first_oom.happened()) return std::nullopt;
            return r.first_oom;
          },
          "The first refused allocation, or None.")
      .def_ro("at_peak_live", &ReplayResult::at_peak_live,
              "What was live at peak live (the live_peak moment).")
      .def_ro("at_peak_reserved", &ReplayResult::at_peak_reserved,
              "What was live at peak reserved (the peak moment).")
      .def_prop_ro(
          "live_at_peak", [](const ReplayResult& r) { return r.at_peak_live.bytes; },
          "Requested bytes live at peak live (at_peak_live.bytes).")
      .def_prop_ro(
          "live_at_peak_count", [](const ReplayResult& r) { return r.at_peak_live.count; },
          "Allocations live at peak live.")
      .def_prop_ro(
          "top_sites", [](const ReplayResult& r) { return r.at_peak_live.top_sites; },
          "What was live at peak live, by the code blamed, largest first "
          "(at_peak_live.top_sites).")
      .def_prop_ro("ns_per_event", [](const ReplayResult& r) { return r.ns_per_event; })
      .def_prop_ro(
          "series",
          [](const ReplayResult& r) {
            std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> out;
            out.reserve(r.series.size());
            for (const ReplaySample& s : r.series) {
              out.emplace_back(s.reserved_bytes, s.allocated_bytes, s.requested_bytes);
            }
            return out;
          },
          "(reserved, allocated, requested) bytes after each op, when replayed with "
          "series=True; else empty.")
      .def("explain", &ReplayResult::explain, "An aligned text report.")
      .def("__str__", &ReplayResult::explain)
      .def("__repr__", [](const ReplayResult& r) {
        return "<memscope.ReplayResult device " + std::to_string(r.device) + ", peak reserved " +
               format_bytes(r.peak_reserved) + ", peak live " + format_bytes(r.peak_requested) +
               (r.num_ooms > 0 ? ", out of memory>" : ">");
      });
}

void bind_fit(nb::module_& m) {
  nb::class_<FitResult>(m, "FitResult",
                        "The smallest simulated device a trace replays on without an "
                        "out-of-memory error (fits at `capacity`, not at capacity - precision).")
      .def_ro("config", &FitResult::config)
      .def_ro("fits", &FitResult::fits)
      .def_prop_ro(
          "capacity",
          [](const FitResult& f) -> std::optional<std::size_t> {
            if (!f.fits) return std::nullopt;
            return f.capacity;
          },
          "The smallest capacity found, or None when nothing up to max_capacity fits.")
      .def_ro("precision", &FitResult::precision)
      .def_ro("lower_bound", &FitResult::lower_bound)
      .def_ro("max_capacity", &FitResult::max_capacity)
      .def_ro("probes", &FitResult::probes, "(capacity, fits) for every replay run.")
      .def("explain", &FitResult::explain)
      .def("__str__", &FitResult::explain)
      .def("__repr__",
           [](const FitResult& f) { return "<memscope.FitResult " + f.explain() + ">"; });
}

void bind_comparison(nb::module_& m) {
  nb::class_<Comparison>(m, "Comparison", "One trace replayed with several settings.")
      .def_prop_ro("results",
                   [](const Comparison& c) {
                     std::vector<ReplayResult> out;
                     for (const ComparisonRow& row : c.rows) out.push_back(row.replay);
                     return out;
                   })
      .def_prop_ro("fits",
                   [](const Comparison& c) {
                     std::vector<std::optional<FitResult>> out;
                     for (const ComparisonRow& row : c.rows) out.push_back(row.fit);
                     return out;
                   })
      .def("__len__", [](const Comparison& c) { return c.rows.size(); })
      .def("__getitem__",
           [](const Comparison& c, std::int64_t i) {
             const auto n = static_cast<std::int64_t>(c.rows.size());
             if (i < 0) i += n;
             if (i < 0 || i >= n) throw nb::index_error("Comparison index out of range");
             return c.rows[static_cast<std::size_t>(i)].replay;
           })
      .def("table", &Comparison::table)
      .def("__str__", &Comparison::table);
}

}  // namespace

void bind_replay_results(nb::module_& m) {
  bind_moment(m);
  bind_site(m);
  bind_breakdown(m);
  nb::class_<ReplayResult> result(
      m, "ReplayResult", "A trace replayed through memscope's allocator on a simulated device.");
  def_replay_figures(result);
  def_replay_moments(result);
  bind_fit(m);
  bind_comparison(m);
}

}  // namespace memscope::python
