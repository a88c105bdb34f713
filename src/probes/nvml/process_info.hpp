// Per-process GPU memory from nvmlDeviceGetComputeRunningProcesses, whichever variant the driver
// has: _v3 and _v2 fill nvmlProcessInfo_v2_t (24 bytes), the original fills
// nvmlProcessInfo_v1_t (16 bytes); calling one with the other's layout would misread every
// entry after the first, so each variant is paired with its own struct.
//
// The list is read with the usual NVML protocol: ask for the count, allocate, ask again, and grow
// on NVML_ERROR_INSUFFICIENT_SIZE (a process may start between the two calls).
//
// Thread safety: as NVML's (thread-safe). Errors: BackendError for NVML failures.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "memscope/device_probe.hpp"
#include "probes/nvml/nvml_loader.hpp"

namespace memscope::detail {

[[nodiscard]] GpuProcess to_gpu_process(const nvml::nvmlProcessInfo_v1_t& info) noexcept;
[[nodiscard]] GpuProcess to_gpu_process(const nvml::nvmlProcessInfo_v2_t& info) noexcept;

// Calls `query(count, buffer)` until it succeeds, growing the buffer on INSUFFICIENT_SIZE, and
// returns what it filled; throws BackendError (naming `what`) for any other result.
template <typename Info, typename Query>
[[nodiscard]] std::vector<Info> read_nvml_list(const NvmlLibrary& library, Query query,
                                               const char* what) {
  std::vector<Info> infos;
  unsigned int count = 0;
  for (int attempt = 0; attempt < 16; ++attempt) {
    infos.resize(count);
    unsigned int filled = count;
    const nvml::nvmlReturn_t result = query(&filled, infos.empty() ? nullptr : infos.data());
    if (result == nvml::NVML_SUCCESS) {
      infos.resize(std::min<std::size_t>(filled, infos.size()));
      return infos;
    }
    if (result != nvml::NVML_ERROR_INSUFFICIENT_SIZE) check_nvml(library, result, what);
    // NVML says how many it has now; leave room for a few more that may start meanwhile.
    count = std::max(filled, count) + 4;
  }
  check_nvml(library, nvml::NVML_ERROR_INSUFFICIENT_SIZE, what);
  return infos;
}

// Compute processes on `device` through the newest variant the library has.
[[nodiscard]] std::vector<GpuProcess> compute_processes(const NvmlLibrary& library,
                                                        nvml::nvmlDevice_t device);

// This process's ids as NVML may list it: getpid() and every NSpid entry of /proc/self/status.
// Inside a PID namespace (a container without --pid=host) NVML reports host PIDs, which the
// process cannot know; then no entry matches.
[[nodiscard]] std::vector<std::uint32_t> own_pids();

}  // namespace memscope::detail
