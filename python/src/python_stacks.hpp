// Python frames for the allocator's recorder (memscope/recording.hpp).
//
// The collector bind_recording() installs reads the calling thread's frames only while that
// thread holds the GIL, and never takes it (it runs under the allocator's lock). Bindings that
// release the GIL around an allocation (Allocator.alloc, Allocator.buffer) capture the frames
// first, with a PythonStackPrecapture on their stack, and the collector hands those over.
#pragma once

#include "memscope/caching_allocator.hpp"

namespace memscope::python {

// Captures the calling thread's Python frames for the allocation it guards, if `allocator`
// records Python stacks (otherwise it costs one relaxed load). Construct it with the GIL held.
class PythonStackPrecapture {
 public:
  explicit PythonStackPrecapture(const CachingAllocator& allocator) noexcept;
  PythonStackPrecapture(const PythonStackPrecapture&) = delete;
  PythonStackPrecapture& operator=(const PythonStackPrecapture&) = delete;
  ~PythonStackPrecapture() noexcept;

 private:
  bool armed_ = false;
};

}  // namespace memscope::python
