// Tracker sources as Python sees them: memscope.MemorySource wraps any C++ source (host RSS, an
// allocator, NVML), and a Python object with the same shape becomes a C++ source here, so
// sources written in Python (the torch.cuda counters in memscope.torch) plug into the tracker.
#pragma once

#include <nanobind/nanobind.h>

#include <exception>
#include <memory>

#include "memscope/memory_source.hpp"

namespace memscope::python {

namespace nb = nanobind;

struct PySourceHandle {
  std::shared_ptr<MemorySource> source;
};

// A memscope.MemorySource, or a Python object with name, kind ("cpu"/"gpu"), available,
// reason, mode, current() and open_window() -> object with begin and close() -> (current, peak).
[[nodiscard]] std::shared_ptr<MemorySource> to_source(nb::handle object);

// Drops a Python reference with the GIL held; leaks it if the interpreter is already gone.
void drop_reference(nb::object& object) noexcept;
// Reports `error` (if any) from a place that must not throw, such as a window's close(): a
// Python exception as "unraisable" (sys.unraisablehook), a C++ one as a RuntimeWarning.
void report_unraisable(const std::exception_ptr& error, const char* context) noexcept;

[[nodiscard]] const char* kind_name(SourceKind kind) noexcept;
[[nodiscard]] SourceKind parse_kind(const std::string& kind);

void bind_sources(nb::module_& m);

}  // namespace memscope::python
