// memscope.Tracker's C++ half, _Tracker (tracker.hpp; python/memscope/_tracking.py builds on
// it), and the stage marks `memscope run` reads. See sources.cpp for why every call into the
// tracker releases the GIL; the metrics functions are in metrics.cpp.
#include "memscope/tracker.hpp"

#include <fmt/format.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "errors.hpp"
#include "memscope/stage_marks.hpp"
#include "metric_values.hpp"
#include "sources.hpp"

namespace memscope::python {
namespace {

struct PyTracker {
  std::unique_ptr<MemoryTracker> impl;
};

// The constructor, and starting and stopping stages.
void def_stages(nb::class_<PyTracker>& cls) {
  cls.def(
         "__init__",
         [](PyTracker* self, const nb::list& sources, bool skip, bool absolute_values,
            bool report_modes, bool implicit_init) {
           TrackerOptions options;
           for (nb::handle s : sources) options.sources.push_back(to_source(s));
           options.skip_memory_metrics = skip;
           options.absolute_values = absolute_values;
           options.report_modes = report_modes;
           options.implicit_init = implicit_init;
           std::unique_ptr<MemoryTracker> tracker;
           {
             nb::gil_scoped_release unlocked;  // the implicit init stage opens windows
             tracker = std::make_unique<MemoryTracker>(std::move(options));
           }
           new (self) PyTracker{std::move(tracker)};
         },
         nb::arg("sources"), nb::arg("skip_memory_metrics") = false,
         nb::arg("absolute_values") = false, nb::arg("report_modes") = false,
         nb::arg("implicit_init") = true)
      .def(
          "start",
          [](PyTracker& t, nb::handle stage) {
            const std::string name = text_arg(stage, "stage");
            nb::gil_scoped_release unlocked;
            t.impl->start(name);
          },
          nb::arg("stage"))
      .def(
          "stop",
          [](PyTracker& t, nb::handle stage) {
            const std::string name = text_arg(stage, "stage");
            nb::gil_scoped_release unlocked;
            t.impl->stop(name);
          },
          nb::arg("stage"));
}

// The metrics of finished stages.
void def_metrics(nb::class_<PyTracker>& cls) {
  cls.def(
         "metrics",
         [](const PyTracker& t, nb::handle stage_name) {
           const std::string stage = text_arg(stage_name, "stage");
           Metrics metrics;
           {
             nb::gil_scoped_release unlocked;
             metrics = t.impl->metrics(stage);
           }
           return to_dict(metrics);
         },
         nb::arg("stage"), "The metrics of the last finished run of `stage` (without init_*).")
      .def(
          "update_metrics",
          [](PyTracker& t, nb::handle stage_name, const nb::dict& metrics) {
            const std::string stage = text_arg(stage_name, "stage");
            Metrics values = to_metrics(metrics);
            {
              nb::gil_scoped_release unlocked;
              t.impl->update_metrics(stage, values);
            }
            return to_dict(values);
          },
          nb::arg("stage"), nb::arg("metrics"),
          "`metrics` plus the stage's (and, the first time, init_*); returns the merged dict.")
      .def(
          "init_metrics",
          [](const PyTracker& t) {
            Metrics metrics;
            {
              nb::gil_scoped_release unlocked;
              metrics = t.impl->init_metrics();
            }
            return to_dict(metrics);
          },
          "init_* and before_init_mem_* once init has finished (update_metrics adds them once).");
}

// What the tracker measures with, and what runs now.
void def_sources(nb::class_<PyTracker>& cls) {
  cls.def_prop_ro("enabled", [](const PyTracker& t) { return t.impl->enabled(); })
      .def("sources",
           [](const PyTracker& t) {
             std::vector<MemoryTracker::SourceInfo> infos;
             {
               nb::gil_scoped_release unlocked;
               infos = t.impl->sources();
             }
             nb::list out;
             for (const auto& s : infos) {
               nb::dict d;
               d["label"] = s.label;
               d["name"] = s.name;
               d["kind"] = kind_name(s.kind);
               d["available"] = s.available;
               d["mode"] = s.mode;
               out.append(d);
             }
             return out;
           })
      .def(
          "notes", [](const PyTracker& t) { return t.impl->notes(); },
          nb::call_guard<nb::gil_scoped_release>(),
          "How each source measures, once: {label: note} (log_metrics prints them).")
      .def(
          "describe_sources", [](const PyTracker& t) { return t.impl->describe_sources(); },
          nb::call_guard<nb::gil_scoped_release>())

      .def(
          "running_stages", [](const PyTracker& t) { return t.impl->running_stages(); },
          nb::call_guard<nb::gil_scoped_release>());
}

// For `memscope run`: whether this process writes stage marks, and writing one.
void bind_stage_marks(nb::module_& m) {
  m.def("_skip_memory_metrics_from_env", &skip_memory_metrics_from_env,
        "MEMSCOPE_SKIP_MEMORY_METRICS as a switch; ConfigError when it is not one.");
  m.def("stage_marks_enabled", &stage_marks_enabled,
        "Whether this process writes stage marks (it runs under `memscope run`).");
  m.def(
      "write_stage_mark",
      [](const std::string& kind, nb::handle stage_name,
         const std::map<std::string, std::int64_t>& metrics) {
        const std::string stage = text_arg(stage_name, "stage");
        if (kind != "begin" && kind != "end") {
          raise(PyExc_ValueError, fmt::format("write_stage_mark: kind '{}' is not a mark kind; "
                                              "use 'begin' or 'end'",
                                              kind));
        }
        nb::gil_scoped_release unlocked;
        write_stage_mark(kind, stage, metrics);
      },
      nb::arg("kind"), nb::arg("stage"), nb::arg("metrics") = std::map<std::string, std::int64_t>{},
      "Writes a stage mark for `memscope run` (a no-op outside it; never blocks or raises for "
      "the pipe). Tracker writes them itself; this is for stages it does not run.");
}

}  // namespace

void bind_tracker(nb::module_& m) {
  bind_sources(m);
  nb::class_<PyTracker> cls(m, "_Tracker");
  def_stages(cls);
  def_metrics(cls);
  def_sources(cls);
  bind_stage_marks(m);
  bind_metrics(m);
}

}  // namespace memscope::python
