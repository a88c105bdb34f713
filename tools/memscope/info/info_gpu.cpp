// `memscope info`, GPU side (info_gpu.hpp): NVML for devices and processes, the CUDA driver for
// its version. NVML creates no CUDA context, so `info` changes nothing on the GPUs it lists.
#include "info/info_gpu.hpp"

#include <exception>
#include <fstream>
#include <iterator>

#include "memscope/cuda_backend.hpp"
#include "memscope/device_probe.hpp"

namespace memscope::cli {
namespace {

std::int64_t as_bytes(std::size_t value) {
  return static_cast<std::int64_t>(value);
}

void read_device(const NvmlProbe& nvml, GpuDeviceInfo& out) {
  const GpuDevice device = nvml.device(out.index);
  out.name = device.name;
  out.uuid = device.uuid;
  const DeviceMemoryInfo memory = nvml.memory(out.index);
  out.total = as_bytes(memory.total);
  out.used = as_bytes(memory.used);
  out.free = as_bytes(memory.free);
  out.reserved = as_bytes(memory.reserved);
  for (const GpuProcess& p : nvml.processes(out.index)) {
    out.processes.push_back(
        {p.pid, p.used_bytes ? as_bytes(*p.used_bytes) : -1, process_command_line(p.pid)});
  }
}

}  // namespace

std::string process_command_line(std::uint32_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  if (!in) return {};
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!text.empty() && text.back() == '\0') text.pop_back();
  for (char& c : text) {
    if (c == '\0') c = ' ';
  }
  return text;
}

std::string cuda_version_text(int version) {
  if (version <= 0) return {};
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

GpuInfo read_gpu_info() {
  GpuInfo info;
  const Availability nvml = NvmlProbe::available();
  info.nvml_available = nvml.available;
  info.nvml_reason = nvml.reason;
  if (nvml.available) {
    try {
      const NvmlProbe probe;
      info.driver_version = probe.driver_version();
      const unsigned count = probe.device_count();
      for (unsigned i = 0; i < count; ++i) {
        GpuDeviceInfo& device = info.devices.emplace_back();
        device.index = i;
        try {
          read_device(probe, device);
        } catch (const std::exception& e) {
          device.error = e.what();  // one device that fails (lost, MIG) does not hide the others
        }
      }
    } catch (const std::exception& e) {
      info.nvml_available = false;
      info.nvml_reason = e.what();
    }
  }
  const Availability cuda = cuda_available();
  info.cuda_available = cuda.available;
  info.cuda_reason = cuda.reason;
  info.cuda_driver_version = cuda_driver_version();
  info.cuda_device_count = cuda_device_count();
  return info;
}

}  // namespace memscope::cli
