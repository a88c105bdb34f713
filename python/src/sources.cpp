// Source wrappers between the tracker and Python.
//
// Python-implemented sources are called by the tracker from whatever thread runs a stage, and
// the tracker calls them under its own mutex; the bindings therefore always release the GIL
// before entering the tracker, and these adapters take it back for each call. (Holding the GIL
// while waiting for the tracker's mutex would deadlock against a thread that holds the mutex
// and waits for the GIL.)
#include "sources.hpp"

#include <fmt/format.h>
#include <nanobind/stl/string.h>

#include <algorithm>

#include "bindings.hpp"
#include "errors.hpp"
#include "handles.hpp"
#include "memscope/caching_allocator.hpp"

namespace memscope::python {
namespace {

// A byte count a Python source returned: an int (or anything with __index__) within signed
// 64 bits; otherwise a TypeError or ValueError naming the source and the call, not nanobind's
// untyped std::bad_cast. `source()` gives the source's name, asked only for the message. GIL held.
template <class Name>
std::int64_t to_bytes(nb::handle value, const Name& source, const char* call) {
  PyObject* index = PyNumber_Index(value.ptr());
  if (index == nullptr) {
    PyErr_Clear();
    raise(PyExc_TypeError, fmt::format("memory source '{}': {} must be an int (bytes), not {}",
                                       source(), call, nb::type_name(value.type()).c_str()));
  }
  const nb::object number = nb::steal(index);
  int overflow = 0;
  const long long bytes = PyLong_AsLongLongAndOverflow(number.ptr(), &overflow);
  if (overflow != 0) {
    raise(PyExc_ValueError,
          fmt::format("memory source '{}': {} gave {}, which does not fit in a signed 64-bit "
                      "integer",
                      source(), call, nb::str(number).c_str()));
  }
  return static_cast<std::int64_t>(bytes);
}

class PyWindow final : public MemorySource::Window {
 public:
  PyWindow(nb::object window, std::int64_t begin, std::string source)
      : window_(std::move(window)), begin_(begin), source_(std::move(source)) {}
  ~PyWindow() override { drop_reference(window_); }

  [[nodiscard]] std::int64_t begin() const noexcept override { return begin_; }

  MemorySource::Reading close() noexcept override {
    MemorySource::Reading r{begin_, begin_};
    nb::gil_scoped_acquire gil;
    try {
      nb::object result = window_.attr("close")();
      const auto source = [this] { return source_; };
      r.current = to_bytes(result[0], source, "close()[0] (current)");
      r.peak = std::max({to_bytes(result[1], source, "close()[1] (peak)"), r.current, begin_});
    } catch (...) {
      report_unraisable(std::current_exception(),
                        "memscope: closing a tracker window of a Python source");
    }
    return r;
  }

 private:
  nb::object window_;
  std::int64_t begin_;
  std::string source_;  // the source's name, for error messages
};

class PySource final : public MemorySource {
 public:
  explicit PySource(nb::handle object)
      : object_(nb::borrow(object)),
        kind_(parse_kind(nb::cast<std::string>(object.attr("kind")))),
        available_(nb::cast<bool>(object.attr("available"))) {}
  ~PySource() override { drop_reference(object_); }

  [[nodiscard]] std::string name() const override { return text("name"); }
  [[nodiscard]] SourceKind kind() const noexcept override { return kind_; }
  [[nodiscard]] bool available() const noexcept override { return available_; }
  [[nodiscard]] std::string reason() const override { return text("reason"); }
  [[nodiscard]] std::string mode() const override { return text("mode"); }
  [[nodiscard]] std::int64_t current() const override {
    nb::gil_scoped_acquire gil;
    return to_bytes(
        object_.attr("current")(), [this] { return text("name"); }, "current()");
  }
  [[nodiscard]] std::unique_ptr<Window> open_window() override {
    nb::gil_scoped_acquire gil;
    nb::object window = object_.attr("open_window")();
    std::string source = text("name");
    const std::int64_t begin = to_bytes(
        window.attr("begin"), [&source] { return source; }, "open_window().begin");
    return std::make_unique<PyWindow>(std::move(window), begin, std::move(source));
  }

 private:
  std::string text(const char* attribute) const {
    nb::gil_scoped_acquire gil;
    return text_arg(
        object_.attr(attribute),
        fmt::format("memory source {}: its {}", nb::type_name(object_.type()).c_str(), attribute));
  }

  nb::object object_;
  SourceKind kind_;
  bool available_;
};

// An allocator source that keeps its allocator alive (the C++ source only borrows it). The
// windows hold the allocator too, since the tracker may destroy them after the source.
class OwningWindow final : public MemorySource::Window {
 public:
  OwningWindow(std::shared_ptr<CachingAllocator> allocator, std::unique_ptr<Window> inner)
      : allocator_(std::move(allocator)), inner_(std::move(inner)) {}
  [[nodiscard]] std::int64_t begin() const noexcept override { return inner_->begin(); }
  MemorySource::Reading close() noexcept override { return inner_->close(); }

 private:
  std::shared_ptr<CachingAllocator> allocator_;  // declared first: destroyed after inner_
  std::unique_ptr<Window> inner_;
};

class OwningAllocatorSource final : public MemorySource {
 public:
  OwningAllocatorSource(std::shared_ptr<CachingAllocator> allocator, SourceKind kind)
      : allocator_(std::move(allocator)), inner_(make_allocator_source(*allocator_, kind)) {}
  [[nodiscard]] std::string name() const override { return inner_->name(); }
  [[nodiscard]] SourceKind kind() const noexcept override { return inner_->kind(); }
  [[nodiscard]] bool available() const noexcept override { return inner_->available(); }
  [[nodiscard]] std::string reason() const override { return inner_->reason(); }
  [[nodiscard]] std::string mode() const override { return inner_->mode(); }
  [[nodiscard]] std::int64_t current() const override { return inner_->current(); }
  [[nodiscard]] std::unique_ptr<Window> open_window() override {
    return std::make_unique<OwningWindow>(allocator_, inner_->open_window());
  }

 private:
  std::shared_ptr<CachingAllocator> allocator_;
  std::shared_ptr<MemorySource> inner_;
};

}  // namespace

void drop_reference(nb::object& object) noexcept {
  if (!object.is_valid()) return;
  if (!Py_IsInitialized()) {
    (void)object.release();
    return;
  }
  nb::gil_scoped_acquire gil;
  object.reset();
}

void report_unraisable(const std::exception_ptr& error, const char* context) noexcept {
  if (!error || !Py_IsInitialized()) return;
  nb::gil_scoped_acquire gil;
  try {
    std::rethrow_exception(error);
  } catch (nb::python_error& e) {
    e.discard_as_unraisable(context);
  } catch (const std::exception& e) {
    if (PyErr_WarnFormat(PyExc_RuntimeWarning, 1, "%s: %s", context, e.what()) < 0)
      PyErr_WriteUnraisable(nullptr);
  } catch (...) {  // NOLINT(bugprone-empty-catch): nothing more is known to report
  }
}

const char* kind_name(SourceKind kind) noexcept {
  return kind == SourceKind::gpu ? "gpu" : "cpu";
}

SourceKind parse_kind(const std::string& kind) {
  if (kind == "cpu") return SourceKind::cpu;
  if (kind == "gpu") return SourceKind::gpu;
  raise(PyExc_ValueError, "a source kind is \"cpu\" or \"gpu\", not \"" + kind + "\"");
}

std::shared_ptr<MemorySource> to_source(nb::handle object) {
  if (nb::isinstance<PySourceHandle>(object)) return nb::cast<PySourceHandle&>(object).source;
  return std::make_shared<PySource>(object);
}

void bind_sources(nb::module_& m) {
  nb::class_<PySourceHandle>(m, "MemorySource",
                             "One memory counter a Tracker watches (host RSS, an allocator, a "
                             "device through NVML).")
      .def_prop_ro("name", [](const PySourceHandle& s) { return s.source->name(); })
      .def_prop_ro("kind", [](const PySourceHandle& s) { return kind_name(s.source->kind()); })
      .def_prop_ro("available", [](const PySourceHandle& s) { return s.source->available(); })
      .def_prop_ro("reason", [](const PySourceHandle& s) { return s.source->reason(); })
      .def_prop_ro("mode", [](const PySourceHandle& s) { return s.source->mode(); })
      .def("current",
           [](const PySourceHandle& s) {
             nb::gil_scoped_release unlocked;
             return s.source->current();
           })
      .def("__repr__", [](const PySourceHandle& s) {
        return "<memscope.MemorySource " + std::string(kind_name(s.source->kind())) + ": " +
               s.source->name() + ", " +
               (s.source->available() ? s.source->mode() : "unavailable: " + s.source->reason()) +
               ">";
      });

  m.def(
      "_host_source",
      [](int pid, bool force_sampling, double sampling_interval) {
        HostProbeOptions options;
        options.pid = pid;
        options.force_sampling = force_sampling;
        options.sampling_interval = interval_from_seconds(sampling_interval);
        return PySourceHandle{make_host_source(options)};
      },
      nb::arg("pid") = 0, nb::arg("force_sampling") = false, nb::arg("sampling_interval") = 0.001);
  m.def(
      "_allocator_source",
      [](const PyAllocator& allocator, const std::string& kind) {
        return PySourceHandle{
            std::make_shared<OwningAllocatorSource>(allocator.impl, parse_kind(kind))};
      },
      nb::arg("allocator"), nb::arg("kind") = "gpu");
  m.def(
      "_unavailable_source",
      [](const std::string& kind, const std::string& name, const std::string& reason) {
        return PySourceHandle{make_unavailable_source(parse_kind(kind), name, reason)};
      },
      nb::arg("kind"), nb::arg("name"), nb::arg("reason"));
}

}  // namespace memscope::python
