// memscope.Allocator: a CachingAllocator with torch.cuda's method names. Its settings, memory
// and identity here; its statistics in allocator_stats.cpp, its recording in recording.cpp.
//
// Calls that can block (allocation misses reserve from the backend, empty_cache waits for
// streams, snapshots copy every block) release the GIL so other Python threads run meanwhile.
#include <fmt/format.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <functional>
#include <memory>
#include <optional>

#include "bindings.hpp"
#include "errors.hpp"
#include "handles.hpp"
#include "memscope/simulated_backend.hpp"
#include "python_stacks.hpp"
#include "registry.hpp"

namespace memscope::python {
namespace {

std::shared_ptr<CachingAllocator> create(const std::string& backend,
                                         const std::optional<std::string>& config) {
  const AllocatorConfig parsed =
      config ? AllocatorConfig::parse(*config) : AllocatorConfig::from_env();
  std::shared_ptr<Backend> b = make_backend(backend);
  return std::make_shared<CachingAllocator>(std::move(b), parsed);
}

SimulatedBackend& simulated(const PyAllocator& a) {
  auto* sim = dynamic_cast<SimulatedBackend*>(&a.impl->backend());
  if (sim == nullptr) raise(error_types().usage, "only a simulated backend can hold streams");
  return *sim;
}

// The constructor, what it was made of, and its memory limit.
void def_settings(nb::class_<PyAllocator>& cls) {
  cls.def(
         "__init__",
         [](PyAllocator* self, const std::string& backend,
            const std::optional<std::string>& config) {
           new (self) PyAllocator{create(backend, config)};
         },
         nb::arg("backend") = "host", nb::arg("config") = nb::none(),
         "backend: \"host\", \"sim:<size>\", \"cuda\" or \"cuda:<index>\"; config: a "
         "MEMSCOPE_ALLOC_CONF-style string (None reads the environment variable).")
      .def_prop_ro("backend", [](const PyAllocator& a) { return a.impl->backend().name(); })
      .def_prop_ro("kind",
                   [](const PyAllocator& a) { return kind_name(a.impl->backend().memory_kind()); })
      .def_prop_ro("capacity", [](const PyAllocator& a) { return a.impl->backend().capacity(); })
      .def_prop_ro("config", [](const PyAllocator& a) { return a.impl->config().to_string(); })
      .def_prop_rw(
          "memory_limit", [](const PyAllocator& a) { return a.impl->memory_limit(); },
          [](PyAllocator& a, std::size_t bytes) { a.impl->set_memory_limit(bytes); })
      .def(
          "set_memory_fraction",
          [](PyAllocator& a, double fraction) {
            a.impl->set_memory_limit(
                memory_limit_from_fraction(fraction, a.impl->backend().capacity()));
          },
          nb::arg("fraction"),
          "Sets memory_limit to `fraction` of the capacity; ConfigError unless 0 < fraction <= 1.");
}

// Allocating and freeing: addresses, Buffers, streams.
void def_memory(nb::class_<PyAllocator>& cls) {
  cls.def(
         "alloc",
         [](PyAllocator& a, std::size_t size, nb::handle stream) {
           const StreamId s = to_stream(stream);
           const PythonStackPrecapture frames(*a.impl);  // before the GIL goes
           nb::gil_scoped_release unlocked;
           return reinterpret_cast<std::uintptr_t>(a.impl->allocate(size, s));
         },
         nb::arg("size"), nb::arg("stream") = nb::none(),
         "Allocates `size` bytes; returns the address (0 for size 0).")
      .def(
          "free",
          [](PyAllocator& a, nb::handle address) {
            if (nb::isinstance<Buffer>(address)) {
              raise(PyExc_TypeError, "free() takes an address; call Buffer.free() on a Buffer");
            }
            const std::uintptr_t p = to_address(address);
            if (p == 0) return;
            if (is_buffer_address(a.impl.get(), p)) {
              raise(error_types().invalid_pointer,
                    fmt::format("{:#x} belongs to a memscope.Buffer; call its free()", p));
            }
            if (!a.impl->try_deallocate(reinterpret_cast<void*>(p))) {
              raise(error_types().invalid_pointer,
                    fmt::format("free({:#x}): not a live allocation of {} (double free or "
                                "foreign pointer)",
                                p, a.impl->backend().name()));
            }
          },
          nb::arg("address"), "Frees an address from alloc(). A double free raises.")
      .def(
          "buffer",
          [](nb::handle self, std::size_t nbytes, nb::handle stream) {
            return make_buffer(self, nbytes, to_stream(stream));
          },
          nb::arg("nbytes"), nb::arg("stream") = nb::none(),
          "Allocates a Buffer that frees itself.")
      .def(
          "record_stream",
          [](PyAllocator& a, nb::handle address, nb::handle stream) {
            const std::uintptr_t p = to_address(address);
            const StreamId s = to_stream(stream);
            nb::gil_scoped_release unlocked;
            a.impl->record_stream(reinterpret_cast<void*>(p), s);
          },
          nb::arg("address"), nb::arg("stream").none())
      .def(
          "lookup",
          [](const PyAllocator& a, nb::handle address) -> nb::object {
            const auto found = a.impl->lookup(reinterpret_cast<void*>(to_address(address)));
            if (found.size == 0) return nb::none();
            nb::dict d;
            d["size"] = found.size;
            d["requested_size"] = found.requested_size;
            d["stream"] = found.stream;
            return d;
          },
          nb::arg("address"), "{size, requested_size, stream} of a live allocation, else None.")
      .def(
          "empty_cache",
          [](PyAllocator& a) {
            nb::gil_scoped_release unlocked;
            return a.impl->empty_cache();
          },
          "Releases every cached segment with no live block; returns the bytes released.");
}

// A Python callable kept by the C++ allocator as an out-of-memory observer. It is called from
// the allocating thread without the allocator's lock (CachingAllocator::throw_oom), takes the
// GIL itself, and never lets an exception out: the allocator throws its own error next, and a
// failing observer must not replace it (its error is reported as unraisable instead). The
// reference is dropped only while the interpreter lives (an allocator may outlive it at exit).
class PyOomObserver {
 public:
  explicit PyOomObserver(nb::handle fn) : fn_(fn.ptr()) { Py_INCREF(fn_); }
  PyOomObserver(const PyOomObserver&) = delete;
  PyOomObserver& operator=(const PyOomObserver&) = delete;
  ~PyOomObserver() {
    if (Py_IsInitialized() == 0) return;
    const nb::gil_scoped_acquire locked;
    Py_DECREF(fn_);
  }

  void operator()(const OutOfMemoryError& e) const noexcept {
    if (Py_IsInitialized() == 0) return;
    const nb::gil_scoped_acquire locked;
    try {
      const nb::dict figures = oom_figures(e.figures());
      PyObject* result = PyObject_CallOneArg(fn_, figures.ptr());
      if (result == nullptr) throw nb::python_error();
      Py_DECREF(result);
    } catch (nb::python_error& err) {
      err.discard_as_unraisable("memscope: an out-of-memory observer");
    } catch (...) {  // NOLINT(bugprone-empty-catch): nothing may leave the observer
    }
  }

 private:
  PyObject* fn_;
};

void def_oom_observer(nb::class_<PyAllocator>& cls) {
  cls.def(
      "add_oom_observer",
      [](PyAllocator& a, nb::callable observer) {
        auto held = std::make_shared<PyOomObserver>(observer);
        a.impl->add_oom_observer([held](const OutOfMemoryError& e) { (*held)(e); });
      },
      nb::arg("observer"),
      "Calls observer(figures) at every out-of-memory error, before it is raised: figures is "
      "OutOfMemoryError.figures (requested, capacity, device_free, allocated, reserved, limit). "
      "It runs without the allocator's lock, so it may read statistics or dump a snapshot; what "
      "it raises is reported as unraisable, never instead of the OutOfMemoryError.");
}

// Equality and hashing by the allocator behind, and the simulated backend's stream control.
void def_identity(nb::class_<PyAllocator>& cls) {
  cls.def("_hold_stream", [](PyAllocator& a, StreamId s) { simulated(a).hold(s); })
      .def("_complete_stream", [](PyAllocator& a, StreamId s) { simulated(a).complete(s); })
      .def("__eq__",
           [](const PyAllocator& a, nb::handle other) {
             return nb::isinstance<PyAllocator>(other) &&
                    nb::cast<const PyAllocator&>(other).impl == a.impl;
           })
      .def("__hash__", [](const PyAllocator& a) { return std::hash<const void*>{}(a.impl.get()); });
}

}  // namespace

void bind_allocator(nb::module_& m) {
  bind_peak_scope(m);
  nb::class_<PyAllocator> cls(
      m, "Allocator", "A caching allocator over one backend, with torch.cuda's statistics.",
      nb::is_weak_referenceable());  // an OOM observer refers to its allocator weakly
  def_settings(cls);
  def_memory(cls);
  def_oom_observer(cls);
  def_allocator_stats(cls);
  def_allocator_recording(cls);
  def_identity(cls);

  m.def(
      "_default_allocator",
      [](const std::string& spec) {
        std::shared_ptr<CachingAllocator> a;
        {
          nb::gil_scoped_release unlocked;  // creating a CUDA backend initialises the driver
          a = default_allocator(spec);
        }
        return PyAllocator{std::move(a)};
      },
      nb::arg("spec"),
      "The process-wide allocator of a backend spec (shared with the torch hooks).");
  m.def("_default_allocator_specs", &default_allocator_specs);
}

}  // namespace memscope::python
