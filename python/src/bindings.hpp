// Entry points of the extension's topic files: module.cpp calls each bind_* once, in order
// (errors first, so every later binding can raise memscope's exception types).
#pragma once

#include <nanobind/nanobind.h>

#include <chrono>
#include <cstdint>

namespace memscope::python {

namespace nb = nanobind;

// A sampling interval given in seconds from Python, as the probes take it.
inline std::chrono::microseconds interval_from_seconds(double seconds) {
  return std::chrono::microseconds(static_cast<std::int64_t>(seconds * 1e6));
}

// Called by the bind_* below, not by module.cpp. bind_allocator() binds PeakValues and PeakScope
// (peak_scope.cpp), makes memscope.Allocator (allocator.cpp) and has each topic file add its
// methods; bind_tracker() binds the metrics functions (metrics.cpp); bind_trace() the results
// of a replay (replay_results.cpp).
struct PyAllocator;
void bind_peak_scope(nb::module_& m);
void def_allocator_stats(nb::class_<PyAllocator>& cls);      // allocator_stats.cpp
void def_allocator_recording(nb::class_<PyAllocator>& cls);  // recording.cpp
void bind_metrics(nb::module_& m);
void bind_replay_results(nb::module_& m);
void bind_oom(nb::module_& m);     // OomExplanation (oom.cpp)
void bind_growth(nb::module_& m);  // GrowthResult (growth.cpp)

void bind_errors(nb::module_& m);
void bind_units(nb::module_& m);
void bind_allocator(nb::module_& m);
void bind_buffer(nb::module_& m);
void bind_host(nb::module_& m);
void bind_devices(nb::module_& m);
void bind_torch_hooks(nb::module_& m);
void bind_tracker(nb::module_& m);
void bind_cascade(nb::module_& m);  // CascadeSource derives from MemorySource (bind_tracker)
void bind_device_probe(nb::module_& m);
void bind_trace(nb::module_& m);       // memscope.Trace: load, replay, explain (trace.cpp)
void bind_recording(nb::module_& m);   // allocator recording and Python stacks (recording.cpp)
void bind_rank_table(nb::module_& m);  // the cross-rank table and payload (rank_table.cpp)
void bind_report(nb::module_& m);      // memscope.Report and its renderings (report.cpp)

}  // namespace memscope::python
