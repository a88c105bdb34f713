// memscope.OomExplanation (memscope/oom.hpp): an out-of-memory event of a trace explained, with
// its counterfactual replays. Figures are read only, except those a live job measures and the
// trace cannot know (the device's total, other processes, memory outside the allocator), which
// memscope.torch.watch sets before rendering the report.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>

#include "bindings.hpp"
#include "memscope/oom.hpp"

namespace memscope::python {

void bind_oom(nb::module_& m) {
  nb::class_<OomCounterfactual>(m, "OomCounterfactual",
                                "One setting replayed on the window that ran out of memory.")
      .def_ro("label", &OomCounterfactual::label)
      .def_ro("config", &OomCounterfactual::config)
      .def_ro("fits", &OomCounterfactual::fits)
      .def_ro("peak_reserved", &OomCounterfactual::peak_reserved)
      .def("__repr__", [](const OomCounterfactual& c) {
        return "<memscope.OomCounterfactual " + c.label + (c.fits ? ": fits>" : ": OOM>");
      });

  nb::class_<OomExplanation>(
      m, "OomExplanation",
      "An out-of-memory event of a trace: the request, the allocator's state, what was live by "
      "site and tag, and whether other settings would have fitted on the same device.")
      .def_ro("device", &OomExplanation::device)
      .def_ro("event", &OomExplanation::event, "Index of the OOM in the device's trace.")
      .def_ro("oom_count", &OomExplanation::oom_count)
      .def_ro("request", &OomExplanation::request)
      .def_ro("device_free", &OomExplanation::device_free)
      .def_ro("time_us", &OomExplanation::time_us)
      .def_ro("tag", &OomExplanation::tag)
      .def_ro("request_site", &OomExplanation::request_site)
      .def_ro("has_segments", &OomExplanation::has_segments)
      .def_ro("segments_at_oom", &OomExplanation::segments_at_oom)
      .def_ro("reserved", &OomExplanation::reserved)
      .def_ro("allocated", &OomExplanation::allocated)
      .def_ro("cached_free", &OomExplanation::cached_free)
      .def_ro("largest_free_block", &OomExplanation::largest_free_block)
      .def_ro("segments", &OomExplanation::segments)
      .def_ro("live_requested", &OomExplanation::live_requested)
      .def_ro("live", &OomExplanation::live)
      .def_ro("by_tag", &OomExplanation::by_tag)
      .def_rw("device_total", &OomExplanation::device_total)
      .def_rw("other_processes", &OomExplanation::other_processes)
      .def_rw("outside_allocator", &OomExplanation::outside_allocator)
      .def_rw("live_source", &OomExplanation::live_source)
      .def_ro("capacity", &OomExplanation::capacity)
      .def_ro("settings", &OomExplanation::settings)
      .def_ro("counterfactuals", &OomExplanation::counterfactuals)
      .def_ro("window_peak_live", &OomExplanation::window_peak_live)
      .def_ro("fits_on", &OomExplanation::fits_on)
      .def_ro("shrink_by", &OomExplanation::shrink_by)
      .def_rw("notes", &OomExplanation::notes)
      .def_prop_ro("reproduced", &OomExplanation::reproduced,
                   "The replay with the job's own settings ran out of memory too.")
      .def("to_report", &OomExplanation::to_report, nb::arg("title") = "",
           "The explanation as a memscope.Report (to_text(), to_json(), to_html()).")
      .def("explain", &OomExplanation::explain, "The report's text.")
      .def("__repr__", [](const OomExplanation& x) {
        return "<memscope.OomExplanation " + format_size(x.request) + " refused at event " +
               std::to_string(x.event) + ">";
      });
}

}  // namespace memscope::python
