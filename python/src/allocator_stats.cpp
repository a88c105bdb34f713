// memscope.Allocator's statistics: torch.cuda's counters and peaks, the summary, the snapshot
// of its segments, and peak windows (PeakScope, peak_scope.cpp).
#include <fmt/format.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include <string>

#include "bindings.hpp"
#include "handles.hpp"
#include "registry.hpp"

namespace memscope::python {
namespace {

std::int64_t stat(const CachingAllocator& a, StatArray MemoryStats::*family, bool peak) {
  const MemoryStats stats = a.stats();
  const Stat& s = (stats.*family)[static_cast<std::size_t>(StatPool::all)];
  return peak ? s.peak : s.current;
}

nb::object snapshot_dict(const CachingAllocator& a) {
  std::string json;
  {
    nb::gil_scoped_release unlocked;
    json = a.snapshot().to_json(-1);
  }
  return nb::module_::import_("json").attr("loads")(json);
}

}  // namespace

void def_allocator_stats(nb::class_<PyAllocator>& cls) {
  cls.def(
         "memory_stats", [](const PyAllocator& a) { return a.impl->memory_stats(); },
         "The flat dict torch.cuda.memory_stats() returns (same key names).")
      .def("memory_allocated",
           [](const PyAllocator& a) { return stat(*a.impl, &MemoryStats::allocated_bytes, false); })
      .def("max_memory_allocated",
           [](const PyAllocator& a) { return stat(*a.impl, &MemoryStats::allocated_bytes, true); })
      .def("memory_reserved",
           [](const PyAllocator& a) { return stat(*a.impl, &MemoryStats::reserved_bytes, false); })
      .def("max_memory_reserved",
           [](const PyAllocator& a) { return stat(*a.impl, &MemoryStats::reserved_bytes, true); })
      .def("reset_peak_memory_stats", [](PyAllocator& a) { a.impl->reset_peak_stats(); })
      .def("reset_accumulated_memory_stats",
           [](PyAllocator& a) { a.impl->reset_accumulated_stats(); })
      .def("memory_summary", [](const PyAllocator& a) { return a.impl->memory_summary(); })
      .def(
          "snapshot", [](const PyAllocator& a) { return snapshot_dict(*a.impl); },
          "{backend, allocator_settings, segments: [...]} in torch's snapshot shape.")

      .def(
          "peak_scope",
          [](PyAllocator& a) {
            return new PyPeakScope{a.impl, a.impl->peak_scope()};
          },
          nb::rv_policy::take_ownership, "Opens an independent peak window (a context manager).")
      .def(
          "mem_get_info",
          [](const PyAllocator& a) {
            return std::pair{a.impl->backend().free_bytes(), a.impl->backend().capacity()};
          },
          "(free, total) bytes of the device, as the backend sees them.")
      .def("__repr__", [](const PyAllocator& a) {
        return fmt::format("<memscope.Allocator {} ({}), {} allocated, {} reserved>",
                           a.impl->backend().name(), kind_name(a.impl->backend().memory_kind()),
                           stat(*a.impl, &MemoryStats::allocated_bytes, false),
                           stat(*a.impl, &MemoryStats::reserved_bytes, false));
      });
}

}  // namespace memscope::python
