// Helpers for the GPU tests: skip when no GPU, streams, a kernel that keeps a stream busy for a
// chosen time, and copies to check that memory really holds what was written. All through the
// driver loaded at run time (no nvcc, no cudart): the kernel is PTX that the driver compiles.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "memscope/backend.hpp"
#include "memscope/cuda_backend.hpp"
#include "memscope/device_probe.hpp"

// Skips the current test, with the reason, unless a CUDA device can be used.
#define MEMSCOPE_REQUIRE_GPU()                                                  \
  do {                                                                          \
    const ::memscope::Availability gpu_ = ::memscope::cuda_available();         \
    if (!gpu_.available) GTEST_SKIP() << "no usable CUDA GPU: " << gpu_.reason; \
  } while (false)

namespace memscope::testing {

// Works in the primary context of `backend`'s device. Not thread-safe; one per test.
class GpuWork {
 public:
  explicit GpuWork(const CudaBackend& backend);
  GpuWork(const GpuWork&) = delete;
  GpuWork& operator=(const GpuWork&) = delete;
  ~GpuWork();

  // A non-blocking stream, destroyed with this object.
  [[nodiscard]] StreamId new_stream();
  // Queues a single-thread kernel on `stream` that spins on the global timer for `duration`.
  void spin(StreamId stream, std::chrono::milliseconds duration);
  // True while work queued on `stream` has not finished.
  [[nodiscard]] bool busy(StreamId stream);
  void synchronize(StreamId stream);
  void fill(void* device, unsigned char value, std::size_t bytes, StreamId stream);
  // Synchronous copy to the host (waits for the legacy default stream's work).
  [[nodiscard]] std::vector<unsigned char> read(const void* device, std::size_t bytes);

 private:
  const CudaBackend& backend_;
  void* module_ = nullptr;  // CUmodule of the spin kernel, loaded on first use
  void* spin_ = nullptr;    // CUfunction
  std::vector<StreamId> streams_;
};

// What NVML says this process holds on the device; where a PID namespace hides the process
// from NVML, the device's used memory (meaningful only while nothing else runs on the GPU:
// ctest runs the `gpu` tests one at a time, RESOURCE_LOCK gpu_device).
class NvmlView {
 public:
  NvmlView(const NvmlProbe& probe, unsigned index);
  [[nodiscard]] bool per_process() const { return per_process_; }
  [[nodiscard]] const char* source() const {
    return per_process_ ? "nvml per-process" : "nvml device used (process not visible)";
  }
  // Reads until two readings 20 ms apart agree, so a figure the driver is still updating is
  // not taken (at most ~1 s).
  [[nodiscard]] std::int64_t settled() const;

 private:
  [[nodiscard]] std::int64_t read() const;
  const NvmlProbe& probe_;
  unsigned index_;
  bool per_process_ = false;
};

}  // namespace memscope::testing
