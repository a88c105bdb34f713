// Host memory as Linux reports it: RSS, its peak, and exact nested peak windows (HostProbe).
// memscope.host (host.py) is the public face; these are its building blocks.
#include <nanobind/stl/string.h>

#include <chrono>

#include "bindings.hpp"
#include "memscope/host_probe.hpp"

namespace memscope::python {
namespace {

nb::dict host_memory_dict(const HostMemory& m) {
  nb::dict d;
  d["rss"] = m.rss;
  d["rss_anon"] = m.rss_anon;
  d["rss_file"] = m.rss_file;
  d["rss_shmem"] = m.rss_shmem;
  d["hwm"] = m.hwm;
  return d;
}

nb::dict reading_dict(const HostProbe::Window::Reading& r) {
  nb::dict d;
  d["current"] = r.current;
  d["peak"] = r.peak;
  return d;
}

struct PyHostWindow {
  HostProbe::Window window;
};

}  // namespace

void bind_host(nb::module_& m) {
  m.def(
      "_read_host_memory", [](int pid) { return host_memory_dict(read_host_memory(pid)); },
      nb::arg("pid") = 0, "/proc/<pid>/status in bytes: rss, rss_anon, rss_file, rss_shmem, hwm.");
  m.def("process_peak_rss", &process_peak_rss,
        "The highest RSS of this process over its lifetime, in bytes: VmHWM and ru_maxrss now and "
        "every high-water mark memscope read before resetting it (kernel-hwm peak windows lower "
        "VmHWM and ru_maxrss, which /usr/bin/time and Slurm report; this does not drop).");

  nb::class_<PyHostWindow>(m, "HostPeakWindow",
                           "An exact peak window over a process's RSS (a context manager).")
      .def_prop_ro("begin", [](const PyHostWindow& w) { return w.window.begin(); })
      .def_prop_ro("is_open", [](const PyHostWindow& w) { return w.window.is_open(); })
      .def(
          "read", [](const PyHostWindow& w) { return reading_dict(w.window.read()); },
          "{current, peak} so far (frozen once closed).")
      .def("close", [](PyHostWindow& w) { return reading_dict(w.window.close()); })
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](PyHostWindow& w, const nb::args&) { (void)w.window.close(); });

  nb::class_<HostProbe>(m, "HostProbe",
                        "Resident memory of a process from /proc, with exact nested peak windows "
                        "(kernel high-water mark, or a sampling thread where that is unavailable).")
      .def(
          "__init__",
          [](HostProbe* self, int pid, bool force_sampling, double sampling_interval) {
            HostProbeOptions options;
            options.pid = pid;
            options.force_sampling = force_sampling;
            options.sampling_interval = interval_from_seconds(sampling_interval);
            new (self) HostProbe(options);
          },
          nb::arg("pid") = 0, nb::arg("force_sampling") = false,
          nb::arg("sampling_interval") = 0.001,
          "pid 0 is this process; sampling_interval is in seconds.")
      .def("read", [](const HostProbe& p) { return host_memory_dict(p.read()); })
      .def("current_rss", &HostProbe::current_rss)
      .def_prop_ro("pid", &HostProbe::pid)
      .def_prop_ro("mode", &HostProbe::mode_name, "\"kernel-hwm\" or \"sampling <interval>\".")
      .def_prop_ro("fallback_reason", &HostProbe::fallback_reason)
      .def_prop_ro("peak_bound", &HostProbe::peak_bound,
                   "Bytes by which readings may differ from the exact RSS: the kernel's per-CPU "
                   "RSS counters are approximate (docs/tracker.md).")
      .def(
          "open_window", [](HostProbe& p) { return new PyHostWindow{p.open_window()}; },
          nb::rv_policy::take_ownership)
      .def("reset_peak", &HostProbe::reset_peak,
           "Resets VmHWM without disturbing any open window (no-op when sampling).");
}

}  // namespace memscope::python
