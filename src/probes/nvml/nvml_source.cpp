// A tracker source (memory_source.hpp) for GPU memory as the driver sees it: what nvidia-smi
// lists for this process, or the device's used memory, polled through NVML.
#include <string>

#include "common/proc_status.hpp"
#include "memscope/device_probe.hpp"
#include "memscope/errors.hpp"
#include "memscope/memory_source.hpp"
#include "probes/nvml/peak_sampler.hpp"
#include "probes/nvml/sampled_window.hpp"

namespace memscope {
namespace {

// True inside a child PID namespace (NSpid lists more than one id): NVML then reports host PIDs
// that this process cannot know, so its own entry can never be found.
bool in_child_pid_namespace() {
  return detail::self_namespace_pids().size() > 1;
}

class NvmlSource final : public MemorySource {
 public:
  NvmlSource(const NvmlProbe& probe, unsigned index, bool device_wide, const std::string& why_wide,
             std::chrono::microseconds interval)
      : name_("nvml cuda device " + probe.device(index).uuid +
              (device_wide ? " (device used)" : " (this process)")),
        mode_("nvml sampling " + std::to_string(interval.count() / 1000) + "ms" +
              (why_wide.empty() ? "" : "; " + why_wide)),
        sampler_(std::make_shared<detail::PeakSampler>(
            [probe, index, device_wide]() -> std::int64_t {
              if (device_wide) return static_cast<std::int64_t>(probe.memory(index).used);
              // Not listed yet: no context on the device, so nothing is held there.
              return static_cast<std::int64_t>(probe.own_process_memory(index).value_or(0));
            },
            interval)) {}

  [[nodiscard]] std::string name() const override { return name_; }
  [[nodiscard]] SourceKind kind() const noexcept override { return SourceKind::gpu; }
  [[nodiscard]] bool available() const noexcept override { return true; }
  [[nodiscard]] std::string reason() const override { return {}; }
  [[nodiscard]] std::string mode() const override { return mode_; }
  [[nodiscard]] std::int64_t current() const override { return sampler_->read(); }
  [[nodiscard]] std::unique_ptr<Window> open_window() override {
    return std::make_unique<detail::SampledWindow>(sampler_, sampler_->read());
  }

 private:
  std::string name_;
  std::string mode_;
  std::shared_ptr<detail::PeakSampler> sampler_;
};

}  // namespace

std::shared_ptr<MemorySource> make_nvml_source(const NvmlSourceOptions& options) {
  const std::string name = "nvml cuda:" + std::to_string(options.cuda_device);
  if (options.sampling_interval.count() <= 0) {
    throw UsageError("make_nvml_source: the sampling interval must be positive");
  }
  const Availability nvml = NvmlProbe::available();
  if (!nvml.available) return make_unavailable_source(SourceKind::gpu, name, nvml.reason);
  try {
    const NvmlProbe probe;
    const unsigned index = probe.nvml_index_of(options.cuda_device);
    bool device_wide = options.device_wide;
    std::string why;
    if (!device_wide && in_child_pid_namespace()) {
      device_wide = true;
      why = "device-wide: a PID namespace hides this process from NVML";
    }
    return std::make_shared<NvmlSource>(probe, index, device_wide, why, options.sampling_interval);
  } catch (const Error& error) {  // unknown device, MIG instance, NVML failure
    return make_unavailable_source(SourceKind::gpu, name, error.what());
  }
}

}  // namespace memscope
