// memscope.Allocator and memscope.PeakScope: a CachingAllocator with torch.cuda's method names.
//
// Calls that can block (allocation misses reserve from the backend, empty_cache waits for
// streams, snapshots copy every block) release the GIL so other Python threads run meanwhile.
#include <fmt/format.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include <array>
#include <functional>
#include <optional>

#include "bindings.hpp"
#include "errors.hpp"
#include "handles.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/trace.hpp"
#include "python_stacks.hpp"
#include "registry.hpp"

namespace memscope::python {
namespace {

// memscope.PeakScope. Members are destroyed in reverse order: the scope closes before the
// allocator reference is dropped, as PeakScope requires.
struct PyPeakScope {
  std::shared_ptr<CachingAllocator> owner;
  PeakScope scope;
};

std::shared_ptr<CachingAllocator> create(const std::string& backend,
                                         const std::optional<std::string>& config) {
  const AllocatorConfig parsed =
      config ? AllocatorConfig::parse(*config) : AllocatorConfig::from_env();
  std::shared_ptr<Backend> b = make_backend(backend);
  return std::make_shared<CachingAllocator>(std::move(b), parsed);
}

std::int64_t stat(const CachingAllocator& a, StatArray MemoryStats::*family, bool peak) {
  const MemoryStats stats = a.stats();
  const Stat& s = (stats.*family)[static_cast<std::size_t>(StatPool::all)];
  return peak ? s.peak : s.current;
}

// The counters of PeakValues, as attributes, as_dict() keys and in repr().
struct PeakField {
  const char* name;
  std::int64_t PeakValues::*member;
};
constexpr std::array<PeakField, 4> kPeakFields{{
    {"allocated_bytes", &PeakValues::allocated_bytes},
    {"reserved_bytes", &PeakValues::reserved_bytes},
    {"active_bytes", &PeakValues::active_bytes},
    {"requested_bytes", &PeakValues::requested_bytes},
}};
static_assert(sizeof(PeakValues) == kPeakFields.size() * sizeof(std::int64_t),
              "PeakValues has a member kPeakFields lacks");

SimulatedBackend& simulated(const PyAllocator& a) {
  auto* sim = dynamic_cast<SimulatedBackend*>(&a.impl->backend());
  if (sim == nullptr) raise(error_types().usage, "only a simulated backend can hold streams");
  return *sim;
}

nb::object snapshot_dict(const CachingAllocator& a) {
  std::string json;
  {
    nb::gil_scoped_release unlocked;
    json = a.snapshot().to_json(-1);
  }
  return nb::module_::import_("json").attr("loads")(json);
}

// stacks=None|"python"|"cpp"|"all" of start_recording().
RecordingOptions recording_options(std::size_t max_entries,
                                   const std::optional<std::string>& stacks) {
  RecordingOptions options;
  options.max_entries = max_entries;
  const std::string s = stacks.value_or("none");
  if (s != "none" && s != "python" && s != "cpp" && s != "all") {
    raise(PyExc_ValueError,
          fmt::format("start_recording(stacks='{}'): use None, \"python\", \"cpp\" or \"all\"", s));
  }
  options.cpp_stacks = s == "cpp" || s == "all";
  options.python_stacks = s == "python" || s == "all";
  return options;
}

}  // namespace

void bind_allocator(nb::module_& m) {
  auto peak_values =
      nb::class_<PeakValues>(m, "PeakValues", "Peak byte counters of a peak scope.")
          .def("as_dict",
               [](const PeakValues& v) {
                 nb::dict d;
                 for (const PeakField& field : kPeakFields) d[field.name] = v.*field.member;
                 return d;
               })
          .def("__eq__", [](const PeakValues& a, const PeakValues& b) { return a == b; })
          .def("__repr__", [](const PeakValues& v) {
            std::string fields;
            for (const PeakField& field : kPeakFields) {
              if (!fields.empty()) fields += ", ";
              fields += fmt::format("{}={}", field.name, v.*field.member);
            }
            return "PeakValues(" + fields + ")";
          });
  for (const PeakField& field : kPeakFields) peak_values.def_ro(field.name, field.member);

  nb::class_<PyPeakScope>(m, "PeakScope",
                          "An independent peak window: `peak` is the highest value of each "
                          "counter since the scope opened. Nestable, closable in any order, "
                          "untouched by reset_peak_memory_stats().")
      .def_prop_ro("peak", [](const PyPeakScope& s) { return s.scope.peak(); })
      .def_prop_ro("begin", [](const PyPeakScope& s) { return s.scope.begin(); })
      .def_prop_ro("is_open", [](const PyPeakScope& s) { return s.scope.is_open(); })
      .def(
          "close", [](PyPeakScope& s) { s.scope.close(); }, "Closes now; `peak` keeps its value.")
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](PyPeakScope& s, const nb::args&) { s.scope.close(); });

  nb::class_<PyAllocator>(m, "Allocator",
                          "A caching allocator over one backend, with torch.cuda's statistics.")
      .def(
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
          "Sets memory_limit to `fraction` of the capacity; ConfigError unless 0 < fraction <= 1.")
      .def(
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
          "Releases every cached segment with no live block; returns the bytes released.")
      .def(
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
          "start_recording",
          [](PyAllocator& a, std::size_t max_entries, const std::optional<std::string>& stacks) {
            a.impl->start_recording(recording_options(max_entries, stacks));
          },
          nb::arg("max_entries") = RecordingOptions{}.max_entries, nb::arg("stacks") = nb::none(),
          "Starts recording afresh (an earlier log is dropped): allocations, frees, segments, "
          "empty_cache and OOMs, keeping the newest max_entries events. stacks: None, "
          "\"python\", \"cpp\" or \"all\" (the frames of each allocation).")
      .def(
          "stop_recording", [](PyAllocator& a) { a.impl->stop_recording(); },
          "Stops recording; the log stays until the next start_recording().")
      .def_prop_ro(
          "recording", [](const PyAllocator& a) { return a.impl->recording(); },
          "Whether events are being recorded.")
      .def(
          "recorded_snapshot",
          [](const PyAllocator& a) {
            nb::gil_scoped_release unlocked;
            return a.impl->recorded_snapshot();
          },
          "The segments now and the recorded events, as a memscope.Trace.")
      .def(
          "dump_snapshot",
          [](const PyAllocator& a, const std::filesystem::path& path) {
            nb::gil_scoped_release unlocked;
            write_torch_snapshot(a.impl->recorded_snapshot(), path);
          },
          nb::arg("path"),
          "Writes the recorded snapshot where PyTorch's memory viewer opens it: a pickle, or "
          "JSON for a path ending in .json (torch.cuda.memory._dump_snapshot's format).")
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
      .def("_hold_stream", [](PyAllocator& a, StreamId s) { simulated(a).hold(s); })
      .def("_complete_stream", [](PyAllocator& a, StreamId s) { simulated(a).complete(s); })
      .def("__eq__",
           [](const PyAllocator& a, nb::handle other) {
             return nb::isinstance<PyAllocator>(other) &&
                    nb::cast<const PyAllocator&>(other).impl == a.impl;
           })
      .def("__hash__", [](const PyAllocator& a) { return std::hash<const void*>{}(a.impl.get()); })
      .def("__repr__", [](const PyAllocator& a) {
        return fmt::format("<memscope.Allocator {} ({}), {} allocated, {} reserved>",
                           a.impl->backend().name(), kind_name(a.impl->backend().memory_kind()),
                           stat(*a.impl, &MemoryStats::allocated_bytes, false),
                           stat(*a.impl, &MemoryStats::reserved_bytes, false));
      });

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
