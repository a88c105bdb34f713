// The stage tracker and the metrics functions (tracker.hpp, metrics.hpp). memscope.Tracker
// (python/memscope/_tracking.py) builds on _Tracker; see sources.cpp for why every call into
// the tracker releases the GIL.
#include "memscope/tracker.hpp"

#include <fmt/format.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "errors.hpp"
#include "memscope/stage_marks.hpp"
#include "sources.hpp"

namespace memscope::python {
namespace {

// A Python value as a metric value: an int (or anything with __index__, such as a numpy
// integer; bool is kept as 0/1 like the Trainer's JSON would), a float (or anything with
// __float__, such as a numpy float or a one-element tensor), or text (str). An int outside the
// signed 64-bit range is a ValueError and any other type a TypeError, both naming the key and
// the value: a metric is never stored as something it was not.
MetricValue to_metric_value(const std::string& key, nb::handle value) {
  PyObject* v = value.ptr();
  if (PyUnicode_Check(v)) return text_arg(value, fmt::format("metric '{}': the value", key));
  if (PyFloat_Check(v)) return PyFloat_AS_DOUBLE(v);
  if (PyIndex_Check(v)) {
    if (PyObject* index = PyNumber_Index(v); index != nullptr) {
      const nb::object number = nb::steal(index);
      int overflow = 0;
      const long long n = PyLong_AsLongLongAndOverflow(number.ptr(), &overflow);
      if (overflow != 0) {
        raise(PyExc_ValueError, fmt::format("metric '{}': {} does not fit in a signed 64-bit "
                                            "integer; pass a float",
                                            key, nb::str(number).c_str()));
      }
      if (n != -1 || PyErr_Occurred() == nullptr) return static_cast<std::int64_t>(n);
    }
    PyErr_Clear();  // __index__ refused (a float tensor): try it as a float below
  }
  if (PyNumber_Check(v) != 0) {
    const double d = PyFloat_AsDouble(v);
    if (d != -1.0 || PyErr_Occurred() == nullptr) return d;
    PyErr_Clear();
  }
  raise(PyExc_TypeError,
        fmt::format("metric '{}': {} is a {}; metric values are int, float or str", key,
                    nb::repr(value).c_str(), nb::type_name(value.type()).c_str()));
}

Metrics to_metrics(const nb::dict& values) {
  Metrics out;
  for (auto [key, value] : values) {
    std::string name = text_arg(nb::str(key), "a metric key");
    MetricValue metric = to_metric_value(name, value);
    out.emplace(std::move(name), std::move(metric));
  }
  return out;
}

nb::dict to_dict(const Metrics& metrics) {
  nb::dict d;
  for (const auto& [key, value] : metrics) {
    std::visit([&](const auto& v) { d[key.c_str()] = v; }, value);
  }
  return d;
}

struct PyTracker {
  std::unique_ptr<MemoryTracker> impl;
};

}  // namespace

void bind_tracker(nb::module_& m) {
  bind_sources(m);

  nb::class_<PyTracker>(m, "_Tracker")
      .def(
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
          nb::arg("stage"))
      .def(
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
          "init_* and before_init_mem_* once init has finished (update_metrics adds them once).")
      .def_prop_ro("enabled", [](const PyTracker& t) { return t.impl->enabled(); })
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
  m.def(
      "metrics_format",
      [](const nb::dict& metrics, bool trainer_compat) {
        return metrics_format(to_metrics(metrics), FormatOptions{trainer_compat});
      },
      nb::arg("metrics"), nb::arg("trainer_compat") = false,
      "Every value as readable text: sizes in one binary unit per table (KiB/MiB/GiB), runtimes, "
      "FLOPs; trainer_compat prints the Trainer's \"MB\"/\"GF\" instead.");
  m.def(
      "format_metrics_table",
      [](const std::string& split, const nb::dict& metrics, bool trainer_compat,
         const MetricNotes& notes) {
        return format_metrics_table(split, to_metrics(metrics), FormatOptions{trainer_compat},
                                    notes);
      },
      nb::arg("split"), nb::arg("metrics"), nb::arg("trainer_compat") = false,
      nb::arg("notes") = MetricNotes{},
      "The aligned table log_metrics prints, and `notes` ({label: text}) once under it.");
  m.def(
      "save_metrics",
      [](const std::string& split, const nb::dict& metrics, const std::filesystem::path& dir,
         bool combined) {
        Metrics values = to_metrics(metrics);
        nb::gil_scoped_release unlocked;  // fsync
        save_metrics(split, values, dir, combined);
      },
      nb::arg("split"), nb::arg("metrics"), nb::arg("output_dir"), nb::arg("combined") = true,
      "Writes {split}_results.json and merges into all_results.json, atomically.");
  m.def(
      "load_metrics", [](const std::filesystem::path& file) { return to_dict(load_metrics(file)); },
      nb::arg("file"));
}

}  // namespace memscope::python
