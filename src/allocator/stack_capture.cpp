// C++ stacks for the recorder: glibc's backtrace() at record time, dladdr() and the C++ ABI's
// demangler when a snapshot is built (stack_capture.hpp).
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

// noinline: frame 0 of backtrace() is then this function, which is skipped.
__attribute__((noinline)) std::size_t capture_cpp_stack(std::uintptr_t* out, std::size_t capacity,
                                                        std::size_t skip) noexcept {
  constexpr std::size_t kMaxSkip = 8;
  std::array<void*, kMaxCppFrames + 1 + kMaxSkip> frames{};
  skip = std::min(skip, kMaxSkip);
  const int n = ::backtrace(frames.data(), static_cast<int>(kMaxCppFrames + 1 + skip));
  std::size_t written = 0;
  for (int i = 1 + static_cast<int>(skip); i < n && written < capacity; ++i) {
    out[written++] = reinterpret_cast<std::uintptr_t>(frames[static_cast<std::size_t>(i)]);
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
