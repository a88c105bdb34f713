// Which physical GPUs a CUDA process sees, and in which order, from CUDA_VISIBLE_DEVICES: the
// map from a CUDA device index (what users pass as "cuda:1") to an NVML device.
//
// The rules follow the CUDA driver's: unset means every device in enumeration order; an empty
// value hides all; entries are comma-separated integers (indices in enumeration order), GPU
// UUIDs with or without the "GPU-" prefix (a unique prefix suffices, case-insensitive), or MIG
// instances ("MIG-..."); the first entry that is invalid, unknown, ambiguous or repeated hides
// itself and every entry after it.
//
// Enumeration order is assumed to be NVML's, which is PCI bus order. CUDA uses that order when
// CUDA_DEVICE_ORDER=PCI_BUS_ID and, on machines whose GPUs are all the same model, in practice
// by default too (its default puts the fastest first). nvml_probe.cpp asks the CUDA driver for
// UUIDs instead when neither holds.
//
// Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memscope::detail {

struct VisibleDevice {
  std::string entry;                 // as written in CUDA_VISIBLE_DEVICES ("1", "GPU-8e6f...")
  std::optional<unsigned> physical;  // index among all devices; nullopt for a MIG instance
};

// `visible` is the variable's value (nullopt when unset); `uuids` are every device's UUIDs as
// NVML prints them ("GPU-8e6f5a1c-..."), in enumeration order.
[[nodiscard]] std::vector<VisibleDevice> resolve_visible_devices(
    std::optional<std::string_view> visible, const std::vector<std::string>& uuids);

}  // namespace memscope::detail
