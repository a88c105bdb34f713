// Device-level questions answered through the CUDA driver, shared by the backend, the factory and
// the device probe's fallback path.
//
// Thread safety: all functions may be called from any thread.
// Errors: open_cuda_device() throws BackendUnavailableError (with the reason); the others throw
// BackendUnavailableError when CUDA is unavailable and BackendError when a driver call fails.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "backends/cuda/driver_loader.hpp"

namespace memscope::detail {

struct OpenedDevice {
  std::shared_ptr<const CudaDriver> driver;
  cu::CUdevice device = 0;
  std::string name;  // cuDeviceGetName, e.g. "NVIDIA H200"
};

// The loaded driver and device `index` (as this process numbers visible devices).
[[nodiscard]] OpenedDevice open_cuda_device(int index);

struct CudaMemInfo {
  std::size_t free = 0;
  std::size_t total = 0;
};
// cuMemGetInfo in the device's primary context. Retains that context for the call, which
// creates it when nobody holds it yet (a few hundred MiB of device memory, released again
// when the last holder lets go): the fallback for machines without NVML, not a hot path.
[[nodiscard]] CudaMemInfo cuda_mem_get_info(int index);

// "GPU-8e6f5a1c-...": the UUID as nvidia-smi and NVML print it. Needs no context.
[[nodiscard]] std::string cuda_device_uuid(int index);

// Lower-case hex of 16 bytes in the 8-4-4-4-12 layout, prefixed "GPU-".
[[nodiscard]] std::string format_gpu_uuid(const unsigned char (&bytes)[16]);

}  // namespace memscope::detail
