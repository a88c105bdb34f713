// memscope's C++ exceptions as Python exception types, and helpers to raise them.
//
// The types are created in C++ (bind_errors) with two bases each, so they can be caught both as
// memscope.Error and as the builtin users expect: OutOfMemoryError is a MemoryError,
// ConfigError / InvalidPointerError / TraceFormatError / ReportFormatError are ValueErrors, the
// rest RuntimeErrors.
// Every memscope::Error thrown out of a binding is translated to its type; OutOfMemoryError
// carries the figures (requested, capacity, device_free, allocated, reserved, limit) as
// attributes and ConfigError its key and value.
#pragma once

#include <nanobind/nanobind.h>

#include "memscope/errors.hpp"

#include <exception>
#include <string>
#include <string_view>

namespace memscope::python {

namespace nb = nanobind;

struct ErrorTypes {
  PyObject* error = nullptr;
  PyObject* out_of_memory = nullptr;
  PyObject* config = nullptr;
  PyObject* backend_unavailable = nullptr;
  PyObject* backend = nullptr;
  PyObject* invalid_pointer = nullptr;
  PyObject* trace_format = nullptr;
  PyObject* report_format = nullptr;
  PyObject* usage = nullptr;
};

// OutOfMemoryError.figures as Python sees them (requested, capacity, device_free, allocated,
// reserved, limit). GIL held.
[[nodiscard]] nb::dict oom_figures(const OutOfMemoryError::Figures& figures);

// Valid once bind_errors() has run (the types live as long as the interpreter).
[[nodiscard]] const ErrorTypes& error_types() noexcept;

// Sets the Python error for a C++ exception (memscope's own types map to theirs, anything else
// to RuntimeError). For C slots, which must return -1 instead of throwing. GIL held.
void set_python_error(const std::exception& e) noexcept;

// Raises `type` with `message` from binding code (GIL held). The message may hold bytes that
// are not UTF-8 (quoted input): they are shown as \xNN escapes, never a UnicodeDecodeError.
[[noreturn]] void raise(PyObject* type, const std::string& message);

// A str argument as UTF-8, checked: TypeError naming `what` for any other type, ValueError
// naming `what` for a str that UTF-8 cannot hold (a lone surrogate such as "\udc80", from
// os.fsdecode of bytes that are not UTF-8). nanobind's own std::string conversion would give
// "incompatible function arguments" or an untyped std::bad_cast. GIL held.
[[nodiscard]] std::string text_arg(nb::handle value, std::string_view what);

}  // namespace memscope::python
