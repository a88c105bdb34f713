// CudaBackend: device memory from the CUDA driver, loaded at run time (no link-time CUDA
// dependency; one build runs with or without a GPU).
//
// Segments come from cuMemAlloc/cuMemFree in the device's primary context, which the backend
// retains for its lifetime: the same context the CUDA runtime and PyTorch use, so pointers,
// streams (StreamId is a CUstream, interchangeable with cudaStream_t; 0 is the legacy default
// stream) and events mix freely with theirs. Calls make the primary context current only for
// their own duration and restore the caller's context. Device indices are those the process
// sees: the driver applies CUDA_VISIBLE_DEVICES (and CUDA_DEVICE_ORDER) when it initialises.
//
// Events are created with CU_EVENT_DISABLE_TIMING and pooled: destroy_event() returns an event
// to a free list that create_event() draws from, so the allocator's per-free events cost no
// driver object creation in steady state.
//
// Page mapping (expandable segments) uses the driver's virtual memory management: the
// granularity is cuMemGetAllocationGranularity's minimum for pinned memory on this device
// (2 MiB on current GPUs); an address range is cuMemAddressReserve (no memory); map_pages()
// creates one physical allocation (cuMemCreate) per page, maps it (cuMemMap) and makes it
// read-write for this device (cuMemSetAccess), returning false, with nothing left mapped, on
// out of memory; unmap_pages() and move_pages() first wait for the stream
// (cuStreamSynchronize: unmapping does not wait for queued kernels), then unmap and release
// each page (the device's free memory rises) or map the same allocation at the new address
// (no new memory, no copy). A driver older than CUDA 10.2, or a device without virtual memory
// management, gives page_granularity() 0 and says why in page_mapping_note().
//
// Shutdown: once the process has begun to exit, release() and the destructor skip driver calls
// (the driver may be torn down already; the OS reclaims device memory with the process).
//
// Thread safety: every method may be called from any thread.
// Errors: the constructor throws BackendUnavailableError (with the reason) when the driver or
// device cannot be used; reserve() returns nullptr on CUDA_ERROR_OUT_OF_MEMORY and throws
// BackendError, naming the driver's error, for anything else. release(), destroy_event() and
// the destructor never throw.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "memscope/backend.hpp"

namespace memscope {

// Whether something can be used here and, when it cannot, why (for demos, tests and logs).
struct Availability {
  bool available = false;
  std::string reason;  // empty when available
};

// The driver loaded, initialised and at least one device visible. Never throws.
[[nodiscard]] Availability cuda_available() noexcept;
// Devices visible to this process; 0 when CUDA is unavailable. Never throws.
[[nodiscard]] int cuda_device_count() noexcept;
// The driver's CUDA version (12040 for 12.4); 0 when CUDA is unavailable. Never throws.
[[nodiscard]] int cuda_driver_version() noexcept;

class CudaBackend final : public Backend {
 public:
  // Retains the primary context of device `device_index` (0-based, as this process numbers
  // visible devices). Throws BackendUnavailableError when CUDA or that device is unavailable.
  explicit CudaBackend(int device_index);
  ~CudaBackend() noexcept override;

  [[nodiscard]] std::string name() const override;  // "cuda:<index>"
  [[nodiscard]] MemoryKind memory_kind() const noexcept override { return MemoryKind::device; }
  [[nodiscard]] std::size_t capacity() const override;    // cuDeviceTotalMem
  [[nodiscard]] std::size_t free_bytes() const override;  // cuMemGetInfo: free for everyone

  [[nodiscard]] void* reserve(std::size_t bytes) override;
  void release(void* base, std::size_t bytes) noexcept override;

  [[nodiscard]] std::size_t page_granularity() const noexcept override;
  [[nodiscard]] void* reserve_address_range(std::size_t bytes) override;
  void release_address_range(void* base, std::size_t bytes) noexcept override;
  [[nodiscard]] bool map_pages(void* address, std::size_t bytes, std::size_t page) override;
  void unmap_pages(void* address, std::size_t bytes, std::size_t page,
                   StreamId stream) noexcept override;
  [[nodiscard]] bool move_pages(void* from, void* to, std::size_t bytes, std::size_t page,
                                StreamId stream) override;
  // Why page_granularity() is 0 (the driver or device cannot map pages); empty when it maps.
  [[nodiscard]] const std::string& page_mapping_note() const noexcept;

  [[nodiscard]] EventId create_event() override;
  void destroy_event(EventId event) noexcept override;
  void record_event(EventId event, StreamId stream) override;
  [[nodiscard]] bool query_event(EventId event) override;
  void synchronize_event(EventId event) override;

  [[nodiscard]] int device_index() const noexcept;
  [[nodiscard]] std::string device_name() const;
  // The retained primary context (a CUcontext), for interoperating code.
  [[nodiscard]] std::uintptr_t context() const noexcept;
  // Events waiting in the pool for reuse.
  [[nodiscard]] std::size_t pooled_events() const;

  // The private state (backends/cuda/cuda_backend_state.hpp), public by name only so that the
  // backend's source files can share it.
  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace memscope
