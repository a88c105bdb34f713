// Recording from Python: the Python stack collector (python_stacks.hpp) and memscope.Allocator's
// recording methods (start_recording, recorded_snapshot, dump_snapshot...).
//
// Frames are read through the CPython 3.11 frame API (PyEval_GetFrame, PyFrame_GetCode,
// PyFrame_GetLineNumber, PyFrame_GetBack). Each code object's file and qualified name are
// converted to UTF-8 once and kept, with a reference to the code object, for the life of the
// process: the recorder stores pointers to these strings, and a code object kept alive cannot
// hand its address to another one.
#include <Python.h>
#include <fmt/format.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <algorithm>
#include <array>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <unordered_map>

#include "bindings.hpp"
#include "errors.hpp"
#include "handles.hpp"
#include "memscope/recording.hpp"
#include "memscope/trace.hpp"
#include "python_stacks.hpp"

namespace memscope::python {
namespace {

constexpr std::size_t kMaxFrames = 64;

struct CodeNames {
  std::string filename;
  std::string name;
};

// Guarded by the GIL. Never destroyed: the recorder may hold pointers into it until exit.
std::unordered_map<PyObject*, CodeNames>& code_names() {
  static auto* const names = new std::unordered_map<PyObject*, CodeNames>;
  return *names;
}

// Line of (code object, instruction offset), guarded by the GIL. PyFrame_GetLineNumber() scans
// the code's line table from its start each time: hundreds of ns in a long function or module,
// the better part of a stack's cost. The code objects are kept alive by code_names().
struct CodeOffset {
  PyObject* code;
  int offset;
  friend bool operator==(const CodeOffset&, const CodeOffset&) = default;
};
struct CodeOffsetHash {
  std::size_t operator()(const CodeOffset& k) const noexcept {
    return std::hash<const void*>{}(k.code) ^
           (static_cast<std::size_t>(k.offset) * std::size_t{0x9e3779b97f4a7c15});
  }
};
std::unordered_map<CodeOffset, int, CodeOffsetHash>& line_cache() {
  static auto* const lines = new std::unordered_map<CodeOffset, int, CodeOffsetHash>;
  return *lines;
}

int line_of(PyFrameObject* frame, PyObject* code) noexcept {
  const CodeOffset key{code, PyFrame_GetLasti(frame)};
  auto& lines = line_cache();
  if (const auto it = lines.find(key); it != lines.end()) return it->second;
  const int line = PyFrame_GetLineNumber(frame);
  try {
    lines.emplace(key, line);
  } catch (...) {  // NOLINT(bugprone-empty-catch): computed again next time
  }
  return line;
}

std::string utf8_attribute(PyObject* object, const char* attribute) {
  std::string out;
  PyObject* value = PyObject_GetAttrString(object, attribute);
  if (value != nullptr && PyUnicode_Check(value)) {
    Py_ssize_t size = 0;
    if (const char* text = PyUnicode_AsUTF8AndSize(value, &size)) {
      out.assign(text, static_cast<std::size_t>(size));
    }
  }
  Py_XDECREF(value);
  if (PyErr_Occurred() != nullptr) PyErr_Clear();
  return out;
}

// The names of `code` (a new reference, which this takes over; the cache keeps one). Null when
// out of memory.
const CodeNames* names_of(PyObject* code) noexcept {
  try {
    auto& names = code_names();
    if (const auto it = names.find(code); it != names.end()) {
      Py_DECREF(code);
      return &it->second;
    }
    CodeNames n{utf8_attribute(code, "co_filename"), utf8_attribute(code, "co_qualname")};
    return &names.emplace(code, std::move(n)).first->second;  // keeps the reference
  } catch (...) {
    Py_DECREF(code);
    return nullptr;
  }
}

// Walks the frames of the thread, which holds the GIL. The cyclic garbage collector is off
// meanwhile: PyFrame_GetBack() may allocate a frame object, and a collection could run a
// finalizer that frees into the allocator whose lock this thread holds.
std::size_t walk_frames(PythonFrame* out, std::size_t capacity) noexcept {
  const int gc_was_enabled = PyGC_Disable();
  std::size_t n = 0;
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  Py_XINCREF(frame);
  while (frame != nullptr && n < capacity) {
    auto* code = reinterpret_cast<PyObject*>(PyFrame_GetCode(frame));
    if (const CodeNames* names = names_of(code)) {  // code stays alive: the cache holds it
      out[n++] = {names->filename.c_str(), names->name.c_str(), line_of(frame, code)};
    }
    PyFrameObject* back = PyFrame_GetBack(frame);  // new reference or null
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  if (PyErr_Occurred() != nullptr) PyErr_Clear();
  if (gc_was_enabled != 0) PyGC_Enable();
  return n;
}

// Frames captured by a PythonStackPrecapture of this thread, for an allocation made with the
// GIL released.
struct Precaptured {
  bool armed = false;
  std::size_t count = 0;
  std::array<PythonFrame, kMaxFrames> frames{};
};
// Behind a pointer, made on a thread's first precapture: the extension's own thread-local
// storage stays a few bytes. A large thread_local here (kMaxFrames frames) is a TLS block that
// glibc may place in the small static-TLS surplus every later-loaded library shares, and
// torch's libgomp then cannot be loaded beside memscope (docs/gpu.md, "Static TLS").
thread_local std::unique_ptr<Precaptured> precaptured;

// Whether the calling thread holds the GIL. Not PyGILState_Check(): it answers yes when the
// interpreter is not (or no longer) initialised, and the recorder may run then.
bool holds_gil() noexcept {
  if (Py_IsInitialized() == 0) return false;
  PyThreadState* mine = PyGILState_GetThisThreadState();
#if PY_VERSION_HEX >= 0x030D0000
  return mine != nullptr && mine == PyThreadState_GetUnchecked();
#else
  return mine != nullptr && mine == _PyThreadState_UncheckedGet();
#endif
}

std::size_t collect(PythonFrame* out, std::size_t capacity) noexcept {
  if (holds_gil()) return walk_frames(out, capacity);
  const Precaptured* frames = precaptured.get();
  if (frames == nullptr || !frames->armed) return 0;
  const std::size_t n = std::min(capacity, frames->count);
  std::copy_n(frames->frames.begin(), n, out);
  return n;
}

}  // namespace

PythonStackPrecapture::PythonStackPrecapture(const CachingAllocator& allocator) noexcept {
  if (!allocator.recording_python_stacks()) return;
  if (!precaptured) precaptured.reset(new (std::nothrow) Precaptured);
  if (!precaptured) return;  // out of memory: this allocation is recorded without a stack
  precaptured->count = walk_frames(precaptured->frames.data(), precaptured->frames.size());
  precaptured->armed = true;
  armed_ = true;
}

PythonStackPrecapture::~PythonStackPrecapture() noexcept {
  if (armed_) precaptured->armed = false;
}

namespace {

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

void def_allocator_recording(nb::class_<PyAllocator>& cls) {
  cls.def(
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
          "JSON for a path ending in .json (torch.cuda.memory._dump_snapshot's format).");
}

void bind_recording(nb::module_& /*m*/) {
  set_python_stack_collector(&collect);
}

}  // namespace memscope::python
