// memscope.GrowthResult and GrowthSite (memscope/growth.hpp): what a trace's iterations kept
// alive, by allocation site and tag. Plain values, read only.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>

#include "bindings.hpp"
#include "memscope/growth.hpp"

namespace memscope::python {

void bind_growth(nb::module_& m) {
  nb::class_<GrowthSite>(m, "GrowthSite",
                         "Allocations of one site and tag that iterations kept alive.")
      .def_prop_ro("where", [](const GrowthSite& s) { return s.site.where(); })
      .def_prop_ro("filename", [](const GrowthSite& s) { return s.site.frame.filename; })
      .def_prop_ro("line", [](const GrowthSite& s) { return s.site.frame.line; })
      .def_prop_ro("name", [](const GrowthSite& s) { return s.site.frame.name; })
      .def_ro("tag", &GrowthSite::tag, "The allocations' tag (their category), or \"\".")
      .def_prop_ro(
          "held", [](const GrowthSite& s) { return s.site.bytes; },
          "Retained bytes live at the last boundary.")
      .def_prop_ro("count", [](const GrowthSite& s) { return s.site.count; })
      .def_ro("iterations", &GrowthSite::iterations)
      .def_ro("bytes_per_iteration", &GrowthSite::bytes_per_iteration)
      .def("text", &GrowthSite::text,
           "\"model.py:88 forward: +4.00 MiB per iteration over 10 iterations, 40.00 MiB held\"")
      .def("__repr__",
           [](const GrowthSite& s) { return "<memscope.GrowthSite " + s.text() + ">"; });

  nb::class_<GrowthResult>(m, "GrowthResult",
                           "Growth across the iterations of a trace (Trace.growth()).")
      .def_ro("device", &GrowthResult::device)
      .def_ro("boundaries_from", &GrowthResult::boundaries_from)
      .def_ro("boundaries", &GrowthResult::boundaries, "Event indices where iterations begin.")
      .def_ro("live_at_boundary", &GrowthResult::live_at_boundary)
      .def_ro("iterations", &GrowthResult::iterations)
      .def_ro("sites", &GrowthResult::sites, "Growing sites, most retained bytes first.")
      .def_ro("retained_bytes", &GrowthResult::retained_bytes)
      .def_prop_ro("growing", &GrowthResult::growing)
      .def("to_report", &GrowthResult::to_report, nb::arg("title") = "",
           "The result as a memscope.Report.")
      .def("explain", &GrowthResult::explain)
      .def("__repr__", [](const GrowthResult& r) {
        return "<memscope.GrowthResult " + std::to_string(r.iterations) + " iterations, " +
               std::to_string(r.sites.size()) + " growing sites>";
      });
}

}  // namespace memscope::python
