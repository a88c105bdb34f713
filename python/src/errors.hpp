// memscope's C++ exceptions as Python exception types, and helpers to raise them.
//
// The types are created in C++ (bind_errors) with two bases each, so they can be caught both as
// memscope.Error and as the builtin users expect: OutOfMemoryError is a MemoryError,
// ConfigError / InvalidPointerError / TraceFormatError are ValueErrors, the rest RuntimeErrors.
// Every memscope::Error thrown out of a binding is translated to its type; OutOfMemoryError
// carries the figures (requested, capacity, device_free, allocated, reserved, limit) as
// attributes and ConfigError its key and value.
#pragma once

#include <nanobind/nanobind.h>

#include <exception>
#include <string>

namespace memscope::python {

struct ErrorTypes {
  PyObject* error = nullptr;
  PyObject* out_of_memory = nullptr;
  PyObject* config = nullptr;
  PyObject* backend_unavailable = nullptr;
  PyObject* backend = nullptr;
  PyObject* invalid_pointer = nullptr;
  PyObject* trace_format = nullptr;
  PyObject* usage = nullptr;
};

// Valid once bind_errors() has run (the types live as long as the interpreter).
[[nodiscard]] const ErrorTypes& error_types() noexcept;

// Sets the Python error for a C++ exception (memscope's own types map to theirs, anything else
// to RuntimeError). For C slots, which must return -1 instead of throwing. GIL held.
void set_python_error(const std::exception& e) noexcept;

// Raises `type` with `message` from binding code (GIL held).
[[noreturn]] void raise(PyObject* type, const std::string& message);

}  // namespace memscope::python
