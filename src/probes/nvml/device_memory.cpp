// device_memory_info(): NVML first (no context, every process's memory), cuMemGetInfo second.
#include "backends/cuda/device_query.hpp"
#include "memscope/device_probe.hpp"
#include "memscope/errors.hpp"

namespace memscope {

DeviceMemoryInfo device_memory_info(int cuda_device) {
  std::string nvml_reason;
  const Availability nvml = NvmlProbe::available();
  if (nvml.available) {
    try {
      const NvmlProbe probe;
      return probe.memory(probe.nvml_index_of(cuda_device));
    } catch (const BackendUnavailableError& error) {  // e.g. a MIG instance: CUDA can answer
      nvml_reason = error.what();
    }
  } else {
    nvml_reason = nvml.reason;
  }
  const Availability cuda = cuda_available();
  if (!cuda.available) {
    throw BackendUnavailableError("cuda:" + std::to_string(cuda_device) +
                                  ": no device memory figures: NVML: " + nvml_reason +
                                  "; CUDA: " + cuda.reason);
  }
  const detail::CudaMemInfo info = detail::cuda_mem_get_info(cuda_device);
  DeviceMemoryInfo out;
  out.total = info.total;
  out.free = info.free;
  out.used = info.total - info.free;
  out.source = "cuda";
  return out;
}

}  // namespace memscope
