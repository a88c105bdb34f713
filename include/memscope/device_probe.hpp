// Device memory as the driver sees it (the numbers nvidia-smi shows), independent of any
// allocator: NVML (libnvidia-ml.so.1, loaded at run time) for every device and process, and
// cuMemGetInfo as the fallback where NVML is missing.
//
// NVML queries create no CUDA context and use no device memory, so a probe can watch a program
// without changing what it measures. Devices are addressed two ways: by NVML index (all GPUs of
// the machine in PCI order, as nvidia-smi numbers them) or by CUDA index (as this process
// numbers them after CUDA_VISIBLE_DEVICES); nvml_index_of() maps the second to the first.
//
// Thread safety: every function and method may be called from any thread.
// Errors: NvmlProbe's constructor throws BackendUnavailableError (with the reason) where NVML
// cannot be used; queries throw BackendError when NVML fails and BackendUnavailableError for a
// device this process cannot see. available() never throws.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "memscope/cuda_backend.hpp"

namespace memscope {

class MemorySource;  // memscope/memory_source.hpp

namespace detail {
struct NvmlLibrary;  // the loaded NVML (src/probes/nvml)
}

// One device's memory, the same whichever source answered: `total` is what processes can
// allocate, as cuMemGetInfo and torch.cuda.mem_get_info report it, and total == free + used.
// NVML's v2 query also reports what the driver and firmware set aside (`reserved`); that is not
// in `total` (nvidia-smi's "total" is total + reserved). Where only NVML v1 answers, `reserved`
// is 0 and the driver's share is counted in `used`.
struct DeviceMemoryInfo {
  std::size_t total = 0;     // usable: free + used
  std::size_t free = 0;      // free for every process
  std::size_t used = 0;      // allocated by every process
  std::size_t reserved = 0;  // set aside by the driver and firmware; 0 where not reported
  std::string source;        // "nvml" or "cuda" (cuMemGetInfo: used = total - free)

  // Physical memory as nvidia-smi's "total" shows it.
  [[nodiscard]] std::size_t physical() const noexcept { return total + reserved; }
};

struct GpuProcess {
  std::uint32_t pid = 0;                  // as the host numbers it (not a container's PID)
  std::optional<std::size_t> used_bytes;  // nullopt where the platform cannot attribute memory
};

struct GpuDevice {
  unsigned nvml_index = 0;
  std::string name;  // "NVIDIA H200"
  std::string uuid;  // "GPU-8e6f5a1c-..."
};

class NvmlProbe {
 public:
  // Whether NVML loads and initialises here, and why not. Never throws.
  [[nodiscard]] static Availability available() noexcept;

  NvmlProbe();  // throws BackendUnavailableError with available().reason

  [[nodiscard]] unsigned device_count() const;
  [[nodiscard]] std::string driver_version() const;  // "550.54.15"
  [[nodiscard]] GpuDevice device(unsigned nvml_index) const;
  // nvmlDeviceGetMemoryInfo_v2 where the driver has it (with `reserved`), else v1.
  [[nodiscard]] DeviceMemoryInfo memory(unsigned nvml_index) const;
  // Compute processes with a context on the device and the memory NVML attributes to each.
  [[nodiscard]] std::vector<GpuProcess> processes(unsigned nvml_index) const;
  // This process's entry in processes(), or nullopt when it is not listed: it has no context on
  // the device yet, or a PID namespace hides its host PID from it (a container).
  [[nodiscard]] std::optional<std::size_t> own_process_memory(unsigned nvml_index) const;
  // NVML index of CUDA device `cuda_index` of this process (CUDA_VISIBLE_DEVICES applied).
  // Throws BackendUnavailableError for an index this process cannot see or a MIG instance
  // (NVML reports MIG memory per GPU instance, not per CUDA device).
  [[nodiscard]] unsigned nvml_index_of(int cuda_index) const;

 private:
  std::shared_ptr<const detail::NvmlLibrary> library_;
};

// Memory of CUDA device `cuda_device` of this process: from NVML when it is available, else
// from cuMemGetInfo (which retains the device's primary context for the call, creating it if
// nobody holds it). Throws BackendUnavailableError, giving both reasons, when neither works.
[[nodiscard]] DeviceMemoryInfo device_memory_info(int cuda_device = 0);

struct NvmlSourceOptions {
  int cuda_device = 0;       // as this process numbers devices
  bool device_wide = false;  // false: this process's GPU memory; true: the device's used memory
  std::chrono::microseconds sampling_interval{10000};  // > 0
};

// A MemoryTracker source (memory_source.hpp) for GPU memory as the driver sees it: by default
// what nvidia-smi lists for this process (context, libraries and every allocator included),
// beside make_allocator_source()'s view of one allocator. Peaks come from polling NVML every
// interval while a window is open (mode() says "nvml sampling 10ms"). Inside a PID namespace,
// where NVML cannot see this process, it measures the device's used memory and says so in
// mode(). Where NVML is unusable it returns an unavailable source that says why. Throws
// UsageError for a non-positive interval.
[[nodiscard]] std::shared_ptr<MemorySource> make_nvml_source(const NvmlSourceOptions& options = {});

}  // namespace memscope
