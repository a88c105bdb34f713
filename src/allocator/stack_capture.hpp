// Stacks for the recorder: C++ return addresses unwound at record time (cheap: no symbols), and
// turned into frames only when a snapshot is built.
#pragma once

#include <cstddef>
#include <cstdint>

#include "memscope/trace_events.hpp"

namespace memscope::detail {

// The deepest C++ stack kept per allocation (innermost frames win).
inline constexpr std::size_t kMaxCppFrames = 48;

// Writes the caller's return addresses, innermost first, into out[0..capacity), starting at
// `start` (a return address of the stack: the frames inside it are left out; counting frames
// instead would depend on what the optimiser inlined), or after this function's own frame when
// `start` is 0 or not found. Returns how many. Never throws.
std::size_t capture_cpp_stack(std::uintptr_t* out, std::size_t capacity,
                              std::uintptr_t start = 0) noexcept;

// Loads the unwinder now (libunwind, or libgcc_s for glibc's backtrace(), is dlopen()ed on
// first use), so no recorded event pays for it.
void warm_up_stack_capture() noexcept;

// The frame of one return address: name = the demangled symbol, or the offset into its object
// ("+0x1a2b") when the object exports no symbol for it (static functions, hidden visibility);
// filename = the executable or shared object; line = 0 (no debug-info lookup).
[[nodiscard]] TraceFrame symbolize(std::uintptr_t return_address);

}  // namespace memscope::detail
