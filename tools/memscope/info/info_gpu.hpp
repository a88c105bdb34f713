// `memscope info`, GPU side: what NVML and the CUDA driver say, as plain values, and why either
// cannot be used where it cannot.
//
// Errors: read_gpu_info() never throws for a machine without GPUs or drivers: it says so in
// nvml_reason / cuda_reason. A query that fails on one device is kept as that device's `error`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memscope::cli {

struct GpuProcessInfo {
  std::uint32_t pid = 0;
  std::int64_t used = -1;  // bytes; -1 where the platform does not attribute memory
  std::string command;     // /proc/<pid>/cmdline, arguments joined by spaces; empty: not visible
};

struct GpuDeviceInfo {
  unsigned index = 0;  // NVML index (nvidia-smi's numbering)
  std::string name;
  std::string uuid;
  std::int64_t total = -1;  // bytes
  std::int64_t used = -1;
  std::int64_t free = -1;
  std::int64_t reserved = -1;
  std::vector<GpuProcessInfo> processes;
  std::string error;  // a query that failed on this device; empty when all worked
};

struct GpuInfo {
  bool nvml_available = false;
  std::string nvml_reason;  // why not; empty when available
  std::string driver_version;
  std::vector<GpuDeviceInfo> devices;
  bool cuda_available = false;
  std::string cuda_reason;
  int cuda_driver_version = 0;  // 12040 for 12.4; 0 when CUDA is unavailable
  int cuda_device_count = 0;
};

[[nodiscard]] GpuInfo read_gpu_info();

// "12.4" from the driver's 12040.
[[nodiscard]] std::string cuda_version_text(int version);

// The command line of `pid` from /proc/<pid>/cmdline, arguments joined by spaces; empty when the
// process has gone or its cmdline cannot be read (another user's, a kernel thread).
[[nodiscard]] std::string process_command_line(std::uint32_t pid);

}  // namespace memscope::cli
