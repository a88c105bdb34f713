// Recording what a CachingAllocator does (CachingAllocator::start_recording): the options, and
// the hook through which a Python front end supplies the Python frames of each allocation.
//
// The recorder keeps the newest `max_entries` events in a ring (older ones are counted as
// dropped) and, when asked, the stack of each allocation: C++ return addresses, symbolized only
// when a snapshot is built, and/or Python frames from the collector below. See docs/design.md,
// "Recording".
//
// Thread safety: set_python_stack_collector() may be called at any time from any thread; the
// collector itself is called under the recording allocator's lock, from the allocating thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace memscope {

struct RecordingOptions {
  std::size_t max_entries = 100000;  // events kept (the newest); 0 is a UsageError
  bool cpp_stacks = false;           // unwind C++ frames of every allocation
  bool python_stacks = false;        // ask the Python stack collector for every allocation
};

// One Python frame. The strings belong to the collector and must stay valid (and unchanged)
// for the rest of the process: the recorder keeps the pointers, not copies.
struct PythonFrame {
  const char* filename = nullptr;
  const char* name = nullptr;
  std::int64_t line = 0;
};

// Writes the calling thread's Python frames, innermost first, into out[0..capacity) and
// returns how many it wrote; 0 when the thread runs no Python code it can see. It must not
// block (in particular never wait for the GIL: the allocator's lock is held) and never throw.
using PythonStackCollector = std::size_t (*)(PythonFrame* out, std::size_t capacity) noexcept;

// Installs the process-wide collector (nullptr removes it). The Python extension installs one
// when it loads.
void set_python_stack_collector(PythonStackCollector collector) noexcept;
[[nodiscard]] PythonStackCollector python_stack_collector() noexcept;

}  // namespace memscope
