// The demo's view of device memory as NVML (nvidia-smi) sees it, when the allocator runs on a
// CUDA device and NVML can be used; otherwise available() is false and the demo shows the
// allocator's and the process's numbers only.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "memscope/backend.hpp"
#include "memscope/cuda_backend.hpp"
#include "memscope/device_probe.hpp"
#include "memscope/errors.hpp"
#include "memscope/memory_source.hpp"
#include "memscope/units.hpp"

class DeviceView {
 public:
  explicit DeviceView(const memscope::Backend& backend) {
    const auto* cuda = dynamic_cast<const memscope::CudaBackend*>(&backend);
    if (cuda == nullptr || !memscope::NvmlProbe::available().available) return;
    try {
      probe_.emplace();
      cuda_index_ = cuda->device_index();
      nvml_index_ = probe_->nvml_index_of(cuda_index_);
    } catch (const memscope::Error&) {
      probe_.reset();  // a MIG instance or an index NVML cannot map: no NVML column
    }
  }

  [[nodiscard]] bool available() const { return probe_.has_value(); }

  // This process's GPU memory as nvidia-smi lists it (context and libraries included).
  [[nodiscard]] std::string process_used() const {
    const std::optional<std::size_t> used = probe_->own_process_memory(nvml_index_);
    return used ? memscope::format_bytes(static_cast<std::int64_t>(*used)) : "not listed";
  }

  [[nodiscard]] std::shared_ptr<memscope::MemorySource> tracker_source() const {
    return memscope::make_nvml_source({.cuda_device = cuda_index_});
  }

 private:
  std::optional<memscope::NvmlProbe> probe_;
  int cuda_index_ = 0;
  unsigned nvml_index_ = 0;
};
