#include "errors.hpp"

#include "bindings.hpp"
#include "memscope/errors.hpp"

namespace memscope::python {
namespace {

ErrorTypes types;

// Text from C++ as a Python str that never fails to decode: messages quote inputs (a trace's
// bytes, a metric key) that may not be UTF-8, and PyErr_SetString would then raise
// UnicodeDecodeError instead of the typed error. `errors` is Python's codec error handler.
nb::object text(std::string_view bytes, const char* errors = "backslashreplace") {
  PyObject* s = PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), errors);
  if (s == nullptr) throw nb::python_error();
  return nb::steal(s);
}

void set_error(PyObject* type, std::string_view message) {
  PyErr_SetObject(type, text(message).ptr());
}

// A new exception class "memscope.<name>" deriving from every type in `bases`.
PyObject* new_type(nb::module_& m, const char* name, std::initializer_list<PyObject*> bases,
                   const char* doc) {
  nb::tuple base_tuple = nb::steal<nb::tuple>(PyTuple_New(static_cast<Py_ssize_t>(bases.size())));
  Py_ssize_t i = 0;
  for (PyObject* base : bases) {
    Py_INCREF(base);
    PyTuple_SET_ITEM(base_tuple.ptr(), i++, base);
  }
  const std::string qualified = std::string("memscope.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, base_tuple.ptr(), nullptr);
  if (type == nullptr) throw nb::python_error();
  m.attr(name) = nb::borrow(type);  // the module keeps a reference; `type` stays ours forever
  return type;
}

// Builds the exception instance so attributes can be attached before it is raised.
void set_with_attributes(PyObject* type, const char* message,
                         std::initializer_list<std::pair<const char*, nb::object>> attrs) {
  PyObject* instance = PyObject_CallOneArg(type, text(message).ptr());
  if (instance == nullptr) return;  // the call set an error of its own; let it stand
  for (const auto& [key, value] : attrs) PyObject_SetAttrString(instance, key, value.ptr());
  PyErr_SetObject(type, instance);
  Py_DECREF(instance);
}

void set_out_of_memory(const OutOfMemoryError& e) {
  const auto& f = e.figures();
  set_with_attributes(types.out_of_memory, e.what(),
                      {{"figures", oom_figures(f)},
                       {"requested", nb::int_(f.requested)},
                       {"capacity", nb::int_(f.capacity)},
                       {"device_free", nb::int_(f.device_free)},
                       {"allocated", nb::int_(f.allocated)},
                       {"reserved", nb::int_(f.reserved)},
                       {"limit", nb::int_(f.limit)}});
}

}  // namespace

nb::dict oom_figures(const OutOfMemoryError::Figures& f) {
  nb::dict figures;
  figures["requested"] = f.requested;
  figures["capacity"] = f.capacity;
  figures["device_free"] = f.device_free;
  figures["allocated"] = f.allocated;
  figures["reserved"] = f.reserved;
  figures["limit"] = f.limit;
  return figures;
}

const ErrorTypes& error_types() noexcept {
  return types;
}

void set_python_error(const std::exception& e) noexcept {
  try {
    if (const auto* oom = dynamic_cast<const OutOfMemoryError*>(&e)) {
      set_out_of_memory(*oom);
    } else if (const auto* config = dynamic_cast<const ConfigError*>(&e)) {
      set_with_attributes(types.config, e.what(),
                          {{"key", text(config->key(), "surrogateescape")},
                           {"value", text(config->value(), "surrogateescape")}});
    } else if (dynamic_cast<const BackendUnavailableError*>(&e) != nullptr) {
      set_error(types.backend_unavailable, e.what());
    } else if (dynamic_cast<const BackendError*>(&e) != nullptr) {
      set_error(types.backend, e.what());
    } else if (dynamic_cast<const InvalidPointerError*>(&e) != nullptr) {
      set_error(types.invalid_pointer, e.what());
    } else if (dynamic_cast<const TraceFormatError*>(&e) != nullptr) {
      set_error(types.trace_format, e.what());
    } else if (dynamic_cast<const ReportFormatError*>(&e) != nullptr) {
      set_error(types.report_format, e.what());
    } else if (dynamic_cast<const UsageError*>(&e) != nullptr) {
      set_error(types.usage, e.what());
    } else if (dynamic_cast<const Error*>(&e) != nullptr) {
      set_error(types.error, e.what());
    } else {
      set_error(PyExc_RuntimeError, e.what());
    }
  } catch (...) {
    // Building the exception itself failed (out of memory in Python); say so plainly.
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
}

void raise(PyObject* type, const std::string& message) {
  set_error(type, message);
  throw nb::python_error();
}

std::string text_arg(nb::handle value, std::string_view what) {
  if (!PyUnicode_Check(value.ptr())) {
    raise(PyExc_TypeError,
          std::string(what) + " must be a str, not " + nb::type_name(value.type()).c_str());
  }
  Py_ssize_t size = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(value.ptr(), &size);
  if (utf8 == nullptr) {
    PyErr_Clear();
    const nb::object shown = nb::steal(PyObject_ASCII(value.ptr()));
    raise(PyExc_ValueError,
          std::string(what) + " " + (shown.is_valid() ? nb::str(shown).c_str() : "") +
              " is not valid text: it holds a lone surrogate, which UTF-8 cannot store "
              "(decode names with errors='replace', or pass clean text)");
  }
  return {utf8, static_cast<std::size_t>(size)};
}

void bind_errors(nb::module_& m) {
  types.error = new_type(m, "Error", {PyExc_Exception}, "Base of every error memscope raises.");
  types.out_of_memory =
      new_type(m, "OutOfMemoryError", {types.error, PyExc_MemoryError},
               "An allocation failed even after releasing the cache and retrying; the allocator "
               "is unharmed. Attributes: requested, capacity, device_free, allocated, reserved, "
               "limit (bytes) and figures (the same as a dict).");
  types.config = new_type(m, "ConfigError", {types.error, PyExc_ValueError},
                          "A configuration string or backend spec is invalid. Attributes: key, "
                          "value (the offending part).");
  types.backend_unavailable =
      new_type(m, "BackendUnavailableError", {types.error, PyExc_RuntimeError},
               "A backend or probe cannot be used on this machine; the message says why.");
  types.backend = new_type(m, "BackendError", {types.error, PyExc_RuntimeError},
                           "The operating system or driver failed (not out of memory).");
  types.invalid_pointer =
      new_type(m, "InvalidPointerError", {types.error, PyExc_ValueError},
               "An address or buffer is not a live allocation (double free, use after free, "
               "foreign pointer).");
  types.trace_format = new_type(m, "TraceFormatError", {types.error, PyExc_ValueError},
                                "A trace or snapshot file is malformed or refused.");
  types.report_format =
      new_type(m, "ReportFormatError", {types.error, PyExc_ValueError},
               "A saved report or result (JSON) is malformed; the message names it and the field.");
  types.usage = new_type(m, "UsageError", {types.error, PyExc_RuntimeError},
                         "The API was used out of order (e.g. stopping a stage never started).");

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      set_python_error(e);
    }
  });
}

}  // namespace memscope::python
