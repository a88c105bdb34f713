// NvmlProbe: device and process memory through NVML.
#include <cstdlib>
#include <set>

#include "backends/cuda/device_query.hpp"
#include "memscope/device_probe.hpp"
#include "memscope/errors.hpp"
#include "probes/nvml/nvml_loader.hpp"
#include "probes/nvml/process_info.hpp"
#include "probes/nvml/visible_devices.hpp"

namespace memscope {

using detail::check_nvml;
using detail::NvmlLibrary;

namespace {

nvml::nvmlDevice_t handle(const NvmlLibrary& library, unsigned nvml_index) {
  nvml::nvmlDevice_t device = nullptr;
  check_nvml(library, library.nvmlDeviceGetHandleByIndex_v2(nvml_index, &device),
             "nvmlDeviceGetHandleByIndex_v2(" + std::to_string(nvml_index) + ")");
  return device;
}

std::string text_query(const NvmlLibrary& library, nvml::nvmlDevice_t device,
                       nvml::nvmlReturn_t (*query)(nvml::nvmlDevice_t, char*, unsigned int),
                       const char* what) {
  char buffer[nvml::kDeviceUuidBufferSize] = {};
  check_nvml(library, query(device, buffer, sizeof(buffer)), what);
  return buffer;
}

const char* env(const char* name) {
  return std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read-only use of the environment
}

}  // namespace

Availability NvmlProbe::available() noexcept {
  const detail::NvmlLoad& load = detail::nvml_library();
  return {load.loaded, load.reason};
}

NvmlProbe::NvmlProbe() {
  const detail::NvmlLoad& load = detail::nvml_library();
  if (!load.loaded) throw BackendUnavailableError("NVML is unavailable: " + load.reason);
  library_ = load.library;
}

unsigned NvmlProbe::device_count() const {
  unsigned count = 0;
  check_nvml(*library_, library_->nvmlDeviceGetCount_v2(&count), "nvmlDeviceGetCount_v2");
  return count;
}

std::string NvmlProbe::driver_version() const {
  char buffer[nvml::kDriverVersionBufferSize] = {};
  check_nvml(*library_, library_->nvmlSystemGetDriverVersion(buffer, sizeof(buffer)),
             "nvmlSystemGetDriverVersion");
  return buffer;
}

GpuDevice NvmlProbe::device(unsigned nvml_index) const {
  const nvml::nvmlDevice_t d = handle(*library_, nvml_index);
  return GpuDevice{nvml_index,
                   text_query(*library_, d, library_->nvmlDeviceGetName, "nvmlDeviceGetName"),
                   text_query(*library_, d, library_->nvmlDeviceGetUUID, "nvmlDeviceGetUUID")};
}

DeviceMemoryInfo NvmlProbe::memory(unsigned nvml_index) const {
  const nvml::nvmlDevice_t d = handle(*library_, nvml_index);
  DeviceMemoryInfo info;
  info.source = "nvml";
  if (library_->nvmlDeviceGetMemoryInfo_v2 != nullptr) {
    nvml::nvmlMemory_v2_t memory{};
    memory.version = nvml::kMemoryV2Version;
    const nvml::nvmlReturn_t result = library_->nvmlDeviceGetMemoryInfo_v2(d, &memory);
    if (result == nvml::NVML_SUCCESS) {
      // v2's total counts what the driver and firmware set aside; cuMemGetInfo's (and so
      // torch.cuda.mem_get_info's) does not. Both sources present the usable total, with
      // total == free + used, and the reserved part beside it (an H200: 615 MiB).
      info.total = memory.total >= memory.reserved ? memory.total - memory.reserved : memory.total;
      info.free = memory.free;
      info.used = memory.used;
      info.reserved = memory.reserved;
      return info;
    }
    // Some drivers export _v2 but refuse it (vGPU, older branches): v1 still answers.
    if (result != nvml::NVML_ERROR_NOT_SUPPORTED &&
        result != nvml::NVML_ERROR_ARGUMENT_VERSION_MISMATCH &&
        result != nvml::NVML_ERROR_FUNCTION_NOT_FOUND) {
      check_nvml(*library_, result, "nvmlDeviceGetMemoryInfo_v2");
    }
  }
  nvml::nvmlMemory_t memory{};
  check_nvml(*library_, library_->nvmlDeviceGetMemoryInfo(d, &memory), "nvmlDeviceGetMemoryInfo");
  info.total = memory.total;
  info.free = memory.free;
  info.used = memory.used;
  return info;
}

std::vector<GpuProcess> NvmlProbe::processes(unsigned nvml_index) const {
  return detail::compute_processes(*library_, handle(*library_, nvml_index));
}

std::optional<std::size_t> NvmlProbe::own_process_memory(unsigned nvml_index) const {
  const std::vector<std::uint32_t> mine = detail::own_pids();
  for (const GpuProcess& process : processes(nvml_index)) {
    for (const std::uint32_t pid : mine) {
      if (process.pid == pid) return process.used_bytes;
    }
  }
  return std::nullopt;
}

unsigned NvmlProbe::nvml_index_of(int cuda_index) const {
  const std::string label = "cuda:" + std::to_string(cuda_index);
  const unsigned count = device_count();
  std::vector<std::string> uuids;
  std::set<std::string> names;
  for (unsigned i = 0; i < count; ++i) {
    const GpuDevice d = device(i);
    uuids.push_back(d.uuid);
    names.insert(d.name);
  }
  // CUDA numbers devices fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID. That is PCI order
  // when all GPUs are one model; otherwise ask the driver for the device's UUID (cuInit only,
  // no context) rather than guess.
  const char* order = env("CUDA_DEVICE_ORDER");
  const bool pci_order = order != nullptr && std::string_view(order) == "PCI_BUS_ID";
  if (!pci_order && names.size() > 1 && cuda_available().available) {
    const std::string uuid = detail::cuda_device_uuid(cuda_index);
    for (unsigned i = 0; i < count; ++i) {
      if (uuids[i] == uuid) return i;
    }
    throw BackendUnavailableError(label + ": NVML lists no device with UUID " + uuid);
  }
  const char* visible = env("CUDA_VISIBLE_DEVICES");
  const auto devices = detail::resolve_visible_devices(
      visible != nullptr ? std::optional<std::string_view>(visible) : std::nullopt, uuids);
  if (cuda_index < 0 || static_cast<std::size_t>(cuda_index) >= devices.size()) {
    throw BackendUnavailableError(
        label + ": no such device; this process sees " + std::to_string(devices.size()) +
        " device(s)" +
        (visible != nullptr ? " (CUDA_VISIBLE_DEVICES=\"" + std::string(visible) + "\")" : ""));
  }
  const detail::VisibleDevice& chosen = devices[static_cast<std::size_t>(cuda_index)];
  if (!chosen.physical) {
    throw BackendUnavailableError(label + " is MIG instance " + chosen.entry +
                                  "; NVML does not report its memory per CUDA device");
  }
  return *chosen.physical;
}

}  // namespace memscope
