// Run-time loading of NVML: dlopen, dlsym of each entry point, nvmlInit_v2.
#include "probes/nvml/nvml_loader.hpp"

#include <dlfcn.h>

#include <cstdlib>

#include "memscope/errors.hpp"

namespace memscope::detail {
namespace {

NvmlLoad failure(std::string reason) {
  return NvmlLoad{false, std::move(reason), nullptr};
}

}  // namespace

NvmlLoad load_nvml(const std::string& path) {
  // glibc keeps dlerror() state per thread, so these calls are safe from any thread.
  dlerror();  // NOLINT(concurrency-mt-unsafe): clears any stale message
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();  // NOLINT(concurrency-mt-unsafe)
    return failure("NVML ('" + path + "') could not be loaded (" +
                   (why != nullptr ? why : "unknown dlopen error") +
                   "); it comes with the NVIDIA driver, or set MEMSCOPE_NVML_LIBRARY");
  }
  auto library = std::make_shared<NvmlLibrary>();
  library->path = path;
  std::string missing;
  // POSIX guarantees that object and function pointers convert through dlsym's void*.
#define MEMSCOPE_NVML_RESOLVE(name, required, ret, params)                  \
  library->name = reinterpret_cast<nvml::PFN_##name>(dlsym(handle, #name)); \
  if ((required) && library->name == nullptr && missing.empty()) missing = #name;
  MEMSCOPE_NVML_FUNCTIONS(MEMSCOPE_NVML_RESOLVE)
#undef MEMSCOPE_NVML_RESOLVE
  if (!missing.empty()) {
    dlclose(handle);
    return failure("'" + path + "' lacks " + missing + "; it is not NVML, or an NVML too old");
  }
  const nvml::nvmlReturn_t init = library->nvmlInit_v2();
  if (init != nvml::NVML_SUCCESS) {
    // Left loaded: nvmlInit_v2 ran and may have set up state inside the library.
    return failure("nvmlInit_v2 failed in '" + path +
                   "': " + describe_nvml_error(library.get(), init) +
                   " (is the NVIDIA kernel module loaded? does nvidia-smi work?)");
  }
  // Never unloaded: NVML is initialised and may be in use by other code of the process.
  return NvmlLoad{true, "", std::move(library)};
}

const NvmlLoad& nvml_library() {
  static const NvmlLoad load = [] {
    const char* override_path =
        std::getenv("MEMSCOPE_NVML_LIBRARY");  // NOLINT(concurrency-mt-unsafe)
    const bool use_override = override_path != nullptr && *override_path != '\0';
    return load_nvml(use_override ? std::string(override_path) : std::string(kNvmlLibrary));
  }();
  return load;
}

std::string describe_nvml_error(const NvmlLibrary* library, nvml::nvmlReturn_t result) {
  const char* text = nullptr;
  if (library != nullptr && library->nvmlErrorString != nullptr) {
    text = library->nvmlErrorString(result);
  }
  std::string out = text != nullptr ? text : "NVML error";
  return out + " (" + std::to_string(static_cast<unsigned int>(result)) + ")";
}

void check_nvml(const NvmlLibrary& library, nvml::nvmlReturn_t result, std::string_view what) {
  if (result == nvml::NVML_SUCCESS) return;
  throw BackendError(std::string(what) + " failed: " + describe_nvml_error(&library, result));
}

}  // namespace memscope::detail
