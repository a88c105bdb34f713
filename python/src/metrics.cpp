// The metrics functions (metrics.hpp): a dict of Python values as Metrics and back, formatting,
// saving and loading. memscope.Tracker's metrics (tracker.cpp) use the same conversions.
#include "memscope/metrics.hpp"

#include <fmt/format.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>

#include "bindings.hpp"
#include "errors.hpp"
#include "metric_values.hpp"

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

}  // namespace

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
  for (const auto& item : metrics) {
    const char* key = item.first.c_str();
    std::visit([&](const auto& v) { d[key] = v; }, item.second);
  }
  return d;
}

const char* unit_name(MetricUnit unit) noexcept {
  switch (unit) {
    case MetricUnit::memory:
      return "memory";
    case MetricUnit::seconds:
      return "seconds";
    case MetricUnit::flops:
      return "flops";
    case MetricUnit::bytes:
      return "bytes";
    case MetricUnit::number:
      break;
  }
  return "number";
}

void bind_metrics(nb::module_& m) {
  m.def(
      "metric_unit", [](const std::string& key) { return unit_name(metric_unit(key)); },
      nb::arg("key"),
      "What a metric holds, by its key: \"memory\" (contains _mem_, the Trainer's rule), "
      "\"seconds\" (_runtime), \"flops\" (total_flos, *_flos), \"bytes\" (*_memscope_*, "
      "*_delta, *_bytes) or \"number\"; the rule of log_metrics, memscope diff and RankTable.");
  m.def(
      "is_memory_key", [](const std::string& key) { return is_memory_key(key); }, nb::arg("key"),
      "Whether a metric key holds bytes: metric_unit(key) is \"memory\" or \"bytes\".");
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
