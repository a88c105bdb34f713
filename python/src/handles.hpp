// The C++ objects behind memscope.Allocator, memscope.Buffer and memscope.PeakScope, and the
// conversions every binding shares (streams and addresses as Python passes them).
#pragma once

#include <nanobind/nanobind.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "memscope/caching_allocator.hpp"

namespace memscope::python {

namespace nb = nanobind;

// memscope.Allocator. Shared ownership: Buffers and PeakScopes keep the allocator alive, so
// Python can drop the Allocator object in any order without a dangling pointer.
struct PyAllocator {
  std::shared_ptr<CachingAllocator> impl;
};

// memscope.PeakScope. Members are destroyed in reverse order: the scope closes before the
// allocator reference is dropped, as PeakScope requires.
struct PyPeakScope {
  std::shared_ptr<CachingAllocator> owner;
  PeakScope scope;
};

// The allocation behind a memscope.Buffer. Shared: the Buffer holds it until free(), and every
// __array_interface__ / __cuda_array_interface__ dict handed out holds it too (as the key
// "memscope_owner"), so an array built from that dict keeps the memory alive even after the
// Buffer is freed or collected. The last holder returns it to the allocator.
struct BufferMemory {
  std::shared_ptr<CachingAllocator> allocator;
  void* ptr = nullptr;

  BufferMemory(std::shared_ptr<CachingAllocator> a, void* p);
  BufferMemory(const BufferMemory&) = delete;
  BufferMemory& operator=(const BufferMemory&) = delete;
  ~BufferMemory() noexcept;
};

// memscope.Buffer: one allocation that frees itself. Not copyable; Python owns it.
//
// Once its address has been lent (the buffer protocol, __array_interface__ or
// __cuda_array_interface__ answered), a consumer may keep a reference to the Buffer itself, or to
// an object that forwards to it, and read the memory later (torch.frombuffer, numpy through a
// property): such references cannot be counted. So free() of a lent Buffer ends the Buffer (every
// use raises) but keeps its memory until the Buffer object itself is collected.
struct Buffer {
  std::shared_ptr<CachingAllocator> allocator;
  std::shared_ptr<BufferMemory> memory;  // null once the allocation is let go
  nb::object owner;                      // the memscope.Allocator it came from (for .allocator)
  void* ptr = nullptr;
  std::size_t nbytes = 0;
  StreamId stream = kDefaultStream;
  MemoryKind kind = MemoryKind::host;
  Py_ssize_t exports = 0;  // live buffer-protocol views (memoryview, numpy arrays)
  bool freed = false;
  bool lent = false;  // its address went to a consumer that may keep a reference to this Buffer

  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() noexcept { memory.reset(); }
  // Ends the Buffer; lets go of the allocation now unless it was lent (then at collection), and it
  // returns to the allocator once no array-interface dict holds it either. False if it was
  // already freed. Never throws.
  bool release() noexcept;
};

// A stream as users pass it: None or 0 (default stream), an int (cudaStream_t value), or an
// object with `cuda_stream` (torch.cuda.Stream) or `ptr` (cupy.cuda.Stream).
[[nodiscard]] StreamId to_stream(nb::handle stream);
// An address as users pass it: an int or a memscope.Buffer.
[[nodiscard]] std::uintptr_t to_address(nb::handle address);

// Allocates `nbytes` on `allocator` (GIL released while it may block) and wraps it.
[[nodiscard]] nb::object make_buffer(nb::handle owner, std::size_t nbytes, StreamId stream);

}  // namespace memscope::python
