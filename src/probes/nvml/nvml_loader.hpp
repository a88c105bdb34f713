// Loads NVML (libnvidia-ml.so.1) at run time and resolves the functions of nvml_api.hpp.
//
// nvml_library() loads it once per process: from $MEMSCOPE_NVML_LIBRARY when set (a path, for
// tests and unusual installs), else "libnvidia-ml.so.1" through the dynamic linker's search,
// then calls nvmlInit_v2. NVML counts initialisations, so ours never disturbs another user in
// the process (pynvml, say); we never call nvmlShutdown, so no NVML call happens during exit.
// NVML queries create no CUDA context and use no device memory.
//
// load_nvml(path) does the same for one explicit path without touching the process-wide state
// (tests load a missing file with it). A failed load closes what it opened.
//
// Thread safety: NVML is thread-safe; nvml_library() is a function-local static.
// Errors: loading never throws; the result says why NVML is unusable.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "probes/nvml/nvml_api.hpp"

namespace memscope::detail {

struct NvmlLibrary {
  std::string path;
#define MEMSCOPE_NVML_MEMBER(name, required, ret, params) nvml::PFN_##name name = nullptr;
  MEMSCOPE_NVML_FUNCTIONS(MEMSCOPE_NVML_MEMBER)
#undef MEMSCOPE_NVML_MEMBER
};

struct NvmlLoad {
  bool loaded = false;
  std::string reason;  // empty when loaded; else what failed
  std::shared_ptr<const NvmlLibrary> library;
};

inline constexpr std::string_view kNvmlLibrary = "libnvidia-ml.so.1";

[[nodiscard]] NvmlLoad load_nvml(const std::string& path);
[[nodiscard]] const NvmlLoad& nvml_library();

// "Insufficient Size (7)", from nvmlErrorString when a library is given.
[[nodiscard]] std::string describe_nvml_error(const NvmlLibrary* library,
                                              nvml::nvmlReturn_t result);

// Throws BackendError "<what> failed: <describe_nvml_error>" unless result is NVML_SUCCESS.
void check_nvml(const NvmlLibrary& library, nvml::nvmlReturn_t result, std::string_view what);

}  // namespace memscope::detail
