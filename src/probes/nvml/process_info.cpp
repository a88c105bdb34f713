#include "probes/nvml/process_info.hpp"

#include <unistd.h>

#include <algorithm>
#include <string>

#include "common/proc_status.hpp"

namespace memscope::detail {
namespace {

std::optional<std::size_t> used_bytes(unsigned long long used) noexcept {
  // NVML_VALUE_NOT_AVAILABLE where the platform cannot attribute memory (e.g. WDDM, some vGPU).
  if (used == nvml::kValueNotAvailable) return std::nullopt;
  return static_cast<std::size_t>(used);
}

template <typename Info, typename Fn>
std::vector<GpuProcess> read_with(const NvmlLibrary& library, Fn fn, nvml::nvmlDevice_t device,
                                  const char* what) {
  const auto infos = read_nvml_list<Info>(
      library, [&](unsigned int* count, Info* buffer) { return fn(device, count, buffer); }, what);
  std::vector<GpuProcess> out;
  out.reserve(infos.size());
  for (const Info& info : infos) out.push_back(to_gpu_process(info));
  return out;
}

}  // namespace

GpuProcess to_gpu_process(const nvml::nvmlProcessInfo_v1_t& info) noexcept {
  return GpuProcess{info.pid, used_bytes(info.usedGpuMemory)};
}

GpuProcess to_gpu_process(const nvml::nvmlProcessInfo_v2_t& info) noexcept {
  return GpuProcess{info.pid, used_bytes(info.usedGpuMemory)};
}

std::vector<GpuProcess> compute_processes(const NvmlLibrary& library, nvml::nvmlDevice_t device) {
  if (library.nvmlDeviceGetComputeRunningProcesses_v3 != nullptr) {
    return read_with<nvml::nvmlProcessInfo_v2_t>(library,
                                                 library.nvmlDeviceGetComputeRunningProcesses_v3,
                                                 device, "nvmlDeviceGetComputeRunningProcesses_v3");
  }
  if (library.nvmlDeviceGetComputeRunningProcesses_v2 != nullptr) {
    return read_with<nvml::nvmlProcessInfo_v2_t>(library,
                                                 library.nvmlDeviceGetComputeRunningProcesses_v2,
                                                 device, "nvmlDeviceGetComputeRunningProcesses_v2");
  }
  if (library.nvmlDeviceGetComputeRunningProcesses != nullptr) {
    return read_with<nvml::nvmlProcessInfo_v1_t>(library,
                                                 library.nvmlDeviceGetComputeRunningProcesses,
                                                 device, "nvmlDeviceGetComputeRunningProcesses");
  }
  check_nvml(library, nvml::NVML_ERROR_FUNCTION_NOT_FOUND, "nvmlDeviceGetComputeRunningProcesses");
  return {};
}

std::vector<std::uint32_t> own_pids() {
  std::vector<std::uint32_t> pids{static_cast<std::uint32_t>(getpid())};
  for (const std::uint32_t pid : self_namespace_pids()) {
    if (std::find(pids.begin(), pids.end(), pid) == pids.end()) pids.push_back(pid);
  }
  return pids;
}

}  // namespace memscope::detail
