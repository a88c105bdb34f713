// Whose code a stack frame is, and which frame of a stack to blame for an allocation
// (replay.hpp: classify_frame(), blamed_frame(); docs/traces.md, "Which code is blamed").
//
// PyTorch records C++ frames by default (_record_memory_history(stacks="all")): a stack then
// reads, innermost first, the unwinder, the caching allocator, ATen's dispatcher, CPython's C
// functions (mostly as "??" frames of an unsymbolized libpython) and only then, interleaved
// with more interpreter frames, the user's Python. The rules below skip all of that.
#include <algorithm>
#include <array>
#include <cctype>
#include <string>
#include <string_view>

#include "memscope/trace.hpp"

namespace memscope {
namespace {

bool contains_any(std::string_view text, const auto& needles) {
  return std::any_of(std::begin(needles), std::end(needles),
                     [&](std::string_view n) { return text.find(n) != std::string_view::npos; });
}

bool starts_with_any(std::string_view text, const auto& prefixes) {
  return std::any_of(std::begin(prefixes), std::end(prefixes),
                     [&](std::string_view p) { return text.starts_with(p); });
}

// The unwinder and the recorders of stacks, and the C library's entry points: never anyone's
// code, whatever the stack.
bool is_machinery_name(std::string_view name) {
  static constexpr std::array<std::string_view, 5> kNames = {
      "unwind::unwind", "CapturedTraceback::", "gather_with_cpp", "__libc_start_main",
      "__libc_init_first"};
  static constexpr std::array<std::string_view, 4> kExact = {"_start", "start_thread", "__clone",
                                                             "__clone3"};
  return contains_any(name, kNames) ||
         std::find(kExact.begin(), kExact.end(), name) != kExact.end();
}

// C++ frameworks by namespace (a demangled name may start with its return type: "void at::").
bool is_framework_name(std::string_view name) {
  static constexpr std::array<std::string_view, 12> kNamespaces = {
      "memscope::", "c10::",  "at::",        "torch::",  "std::", "caffe2::",
      "pybind11::", "c10d::", "__gnu_cxx::", "thrust::", "cub::", "nanobind::"};
  if (starts_with_any(name, kNamespaces)) return true;
  const std::size_t space = name.find(' ');
  if (space != std::string_view::npos && name.find('(') > space) {
    return starts_with_any(name.substr(space + 1), kNamespaces);
  }
  return false;
}

// CPython's C API and internals: Py_RunMain, PyCMethod_New, _PyEval_EvalFrameDefault.
bool is_cpython_name(std::string_view name) {
  const std::string_view rest = name.starts_with("_Py")  ? name.substr(3)
                                : name.starts_with("Py") ? name.substr(2)
                                                         : std::string_view();
  return !rest.empty() &&
         (rest.front() == '_' || std::isupper(static_cast<unsigned char>(rest.front())) != 0);
}

// A source or object file of compiled code.
bool is_native_file(std::string_view file) {
  static constexpr std::array<std::string_view, 13> kExtensions = {
      ".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".cu", ".cuh", ".S", ".s", ".inl", ".ipp"};
  return std::any_of(kExtensions.begin(), kExtensions.end(),
                     [&](std::string_view ext) { return file.ends_with(ext); });
}

bool is_shared_object(std::string_view file) {
  return file.ends_with(".so") || file.find(".so.") != std::string_view::npos ||
         file.ends_with(".dylib") || file.ends_with(".dll") || file.ends_with(".pyd");
}

// Python's standard library: lib/python3.X on POSIX; on Windows, Lib\ of an installation, or
// lib\ under a folder named python... or cpython... (uv, pyenv-win).
bool is_stdlib_path(std::string_view file, bool windows) {
  static constexpr std::array<std::string_view, 2> kPosix = {"/lib/python3", "/lib64/python3"};
  if (contains_any(file, kPosix)) return true;
  if (!windows) return false;
  if (file.find("/Lib/") != std::string_view::npos) return true;
  std::string lower(file);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (std::string_view installation : {"/python", "/cpython"}) {
    const std::size_t at = lower.find(installation);
    if (at != std::string::npos && lower.find("/lib/", at) != std::string::npos) return true;
  }
  return false;
}

bool is_python_file(std::string_view file) {
  return file.ends_with(".py");
}

FrameKind classify(std::string_view file, std::string_view name, bool windows, bool python_stack) {
  // Names say whose a compiled frame is; a Python function may be called anything.
  if (!is_python_file(file) &&
      (is_machinery_name(name) || is_framework_name(name) || is_cpython_name(name))) {
    return FrameKind::internal;
  }
  // An object file names compiled code shipped without its source (libstdc++'s thread48.o). A
  // name that is only an offset ("+0x3fcf9") is code dladdr() could not name, a function's
  // cold part split off by the compiler (the allocator's own slow path) or a static one: it
  // names nobody's code, so the blame goes on to a named frame.
  if (file.empty() || file == "??" || file.starts_with("<frozen ") || file.ends_with(".o") ||
      (!is_python_file(file) && name.starts_with("+0x"))) {
    return FrameKind::internal;
  }
  if (is_native_file(file)) {
    // In a Python program compiled code is the interpreter's or a framework's; in a native
    // program it is the program's own unless it is the C library's.
    static constexpr std::array<std::string_view, 3> kLibc = {"/nptl/", "/sysdeps/", "/csu/"};
    return python_stack || contains_any(file, kLibc) ? FrameKind::internal : FrameKind::user;
  }
  static constexpr std::array<std::string_view, 6> kLibraryPaths = {
      "/site-packages/", "/dist-packages/", "/torch/",
      "torchinductor_",  "<eval_with_key>", "/torch_extensions/"};
  if (contains_any(file, kLibraryPaths) || file.starts_with("torch/") || is_shared_object(file) ||
      is_stdlib_path(file, windows)) {
    return FrameKind::library;
  }
  return FrameKind::user;
}

// The frame of an autograd node: the autograd engine's threads run them with no Python on the
// stack, and the node (MulBackward0) says what the framework was doing for the user.
bool is_autograd_node(std::string_view name) {
  return name.find("autograd::generated::") != std::string_view::npos &&
         name.find("::apply") != std::string_view::npos;
}

}  // namespace

FrameKind classify_frame(const TraceFrame& frame, bool python_stack) {
  if (frame.filename.find('\\') == std::string::npos) {
    return classify(frame.filename, frame.name, false, python_stack);
  }
  // Windows paths (PyTorch on Windows records them) read as POSIX ones.
  std::string file = frame.filename;
  std::replace(file.begin(), file.end(), '\\', '/');
  return classify(file, frame.name, true, python_stack);
}

bool is_plumbing_frame(const TraceFrame& frame) {
  return classify_frame(frame) != FrameKind::user;
}

const TraceFrame* blamed_frame(const TraceStrings& strings, StackId stack) {
  if (stack >= strings.stacks.size()) return nullptr;
  const std::vector<std::uint32_t>& ids = strings.stacks[stack];
  const auto frame = [&](std::uint32_t id) -> const TraceFrame* {
    return id < strings.frames.size() ? &strings.frames[id] : nullptr;
  };
  const bool python_stack = std::any_of(ids.begin(), ids.end(), [&](std::uint32_t id) {
    const TraceFrame* f = frame(id);
    return f != nullptr && is_python_file(f->filename);
  });
  const TraceFrame* library = nullptr;
  const TraceFrame* node = nullptr;       // the innermost autograd node
  const TraceFrame* operation = nullptr;  // the outermost ATen operator: the one called
  const TraceFrame* outside_machinery = nullptr;
  for (const std::uint32_t id : ids) {
    const TraceFrame* f = frame(id);
    if (f == nullptr) continue;
    const FrameKind kind = classify_frame(*f, python_stack);
    if (kind == FrameKind::user) return f;
    if (kind == FrameKind::library && library == nullptr) library = f;
    if (node == nullptr && is_autograd_node(f->name)) node = f;
    if (f->name.starts_with("at::_ops::")) operation = f;
    if (outside_machinery == nullptr && !f->name.empty() && !is_machinery_name(f->name) &&
        !f->name.starts_with("memscope::") &&
        f->name.find("CachingAllocator") == std::string::npos) {
      outside_machinery = f;
    }
  }
  if (library != nullptr) return library;
  if (node != nullptr) return node;
  if (operation != nullptr) return operation;
  if (outside_machinery != nullptr) return outside_machinery;
  return ids.empty() ? nullptr : frame(ids.front());
}

}  // namespace memscope
