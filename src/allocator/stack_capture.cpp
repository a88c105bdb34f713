// C++ stacks for the recorder: return addresses at record time (libunwind's unw_backtrace() if
// the system has it, else glibc's backtrace()), dladdr() and the C++ ABI's demangler when a
// snapshot is built (stack_capture.hpp).
#include "allocator/stack_capture.hpp"

#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>

namespace memscope::detail {

namespace {

using Backtrace = int (*)(void** buffer, int size);

// Not under ThreadSanitizer: libunwind frees its per-thread cache from a thread-exit destructor
// that locks a mutex, which TSan intercepts after it has torn the thread's state down (SIGSEGV
// in __tsan::MutexPreLock as each recording thread exits).
#if defined(__SANITIZE_THREAD__)
constexpr bool kTryLibunwind = false;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kTryLibunwind = false;
#else
constexpr bool kTryLibunwind = true;
#endif
#else
constexpr bool kTryLibunwind = true;
#endif

// The unwinder: libunwind's unw_backtrace() when the system has libunwind (it caches how to
// step over each return address: about 9 ns a frame, against about 220 ns for glibc's
// backtrace(), which interprets the DWARF call-frame program of every frame every time), else
// glibc's. Loaded at run time like CUDA, so memscope does not depend on it; RTLD_LOCAL keeps its
// _Unwind_* symbols from replacing libgcc's, which C++ exceptions use.
Backtrace unwinder() noexcept {
  static const Backtrace chosen = []() -> Backtrace {
    void* lib = kTryLibunwind ? ::dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL) : nullptr;
    if (lib != nullptr) {
      if (void* f = ::dlsym(lib, "unw_backtrace")) return reinterpret_cast<Backtrace>(f);
    }
    return &::backtrace;
  }();
  return chosen;
}

}  // namespace

// noinline: frame 0 of the unwinder's answer is then this function, which is skipped.
__attribute__((noinline)) std::size_t capture_cpp_stack(std::uintptr_t* out, std::size_t capacity,
                                                        std::uintptr_t start) noexcept {
  constexpr std::size_t kMaxInner = 8;  // frames looked through for `start`
  std::array<void*, kMaxCppFrames + 1 + kMaxInner> frames{};
  const int got = unwinder()(frames.data(), static_cast<int>(frames.size()));
  const std::size_t n = got > 0 ? static_cast<std::size_t>(got) : 0;
  std::size_t first = 1;
  for (std::size_t i = 1; start != 0 && i < n && i <= kMaxInner; ++i) {
    if (reinterpret_cast<std::uintptr_t>(frames[i]) == start) {
      first = i;
      break;
    }
  }
  std::size_t written = 0;
  for (std::size_t i = first; i < n && written < capacity; ++i) {
    out[written++] = reinterpret_cast<std::uintptr_t>(frames[i]);
  }
  return written;
}

void warm_up_stack_capture() noexcept {
  std::array<std::uintptr_t, 2> pcs{};
  (void)capture_cpp_stack(pcs.data(), pcs.size());
}

TraceFrame symbolize(std::uintptr_t return_address) {
  TraceFrame frame;
  // A return address points after the call; the call itself (one byte back) is in the caller,
  // even when the call is the last instruction of a function.
  const std::uintptr_t pc = return_address == 0 ? 0 : return_address - 1;
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(pc), &info) == 0) {  // NOLINT(performance-no-int-to-ptr)
    frame.name = fmt::format("{:#x}", return_address);
    return frame;
  }
  if (info.dli_fname != nullptr) frame.filename = info.dli_fname;
  if (info.dli_sname != nullptr) {
    int status = 0;
    const std::unique_ptr<char, decltype(&std::free)> demangled(
        abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status), &std::free);
    frame.name = status == 0 && demangled ? demangled.get() : info.dli_sname;
  } else {
    frame.name = fmt::format("+{:#x}", pc - reinterpret_cast<std::uintptr_t>(info.dli_fbase));
  }
  return frame;
}

}  // namespace memscope::detail
