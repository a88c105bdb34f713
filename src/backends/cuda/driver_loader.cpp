// Run-time loading of the CUDA driver: dlopen, stub detection, cuInit, then cuGetProcAddress with
// the explicit ABI version of every function (see driver_api.hpp for why versions are explicit).
#include "backends/cuda/driver_loader.hpp"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "memscope/errors.hpp"

namespace memscope::detail {
namespace {

std::atomic<bool> g_shutting_down{false};

// Registered once, right after the first successful cuInit. atexit handlers run in reverse
// order of registration, so this runs before any teardown the driver registered inside cuInit,
// and before the destructors of statics built before the driver was loaded (the ones that could
// otherwise call a driver that is gone). Statics built later are destroyed before this runs,
// while the driver is still whole, and release normally.
void register_shutdown_flag() {
  static std::once_flag once;
  std::call_once(once, [] { std::atexit([] { g_shutting_down.store(true); }); });
}

// Closes the library unless ownership is taken: failed loads must not leave a stub resident,
// because a later dlopen("libcuda.so.1") would find it by its soname instead of the driver.
class LibraryHandle {
 public:
  explicit LibraryHandle(void* handle) : handle_(handle) {}
  LibraryHandle(const LibraryHandle&) = delete;
  LibraryHandle& operator=(const LibraryHandle&) = delete;
  ~LibraryHandle() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  [[nodiscard]] void* get() const noexcept { return handle_; }
  // The driver is never unloaded once in use: it owns threads and state past our last call.
  void keep() noexcept { handle_ = nullptr; }

 private:
  void* handle_;
};

template <typename Fn>
Fn find_symbol(void* handle, const char* name) {
  // POSIX guarantees that object and function pointers convert through dlsym's void*.
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

DriverLoad failure(DriverStatus status, std::string reason) {
  return DriverLoad{status, std::move(reason), nullptr};
}

// Resolves every function of driver_api.hpp through cuGetProcAddress. Returns the name of a
// required function that could not be found, or an empty string.
std::string resolve_functions(void* handle, CudaDriver& driver) {
  auto get_v2 = find_symbol<cu::PFN_cuGetProcAddress_v2>(handle, "cuGetProcAddress_v2");
  auto get_v1 = find_symbol<cu::PFN_cuGetProcAddress_v1>(handle, "cuGetProcAddress");
  if (get_v2 == nullptr && get_v1 == nullptr) return "cuGetProcAddress";
  // Legacy default-stream semantics: stream 0 is the NULL stream, as in PyTorch and cudart.
  const cu::cuuint64_t flags = cu::CU_GET_PROC_ADDRESS_LEGACY_STREAM;
  auto lookup = [&](const char* name, int version) -> void* {
    void* fn = nullptr;
    cu::CUresult result = cu::CUDA_SUCCESS;
    if (get_v2 != nullptr) {
      cu::CUdriverProcAddressQueryResult status = cu::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
      result = get_v2(name, &fn, version, flags, &status);
      if (status != cu::CU_GET_PROC_ADDRESS_SUCCESS) fn = nullptr;
    } else {
      result = get_v1(name, &fn, version, flags);
    }
    return result == cu::CUDA_SUCCESS ? fn : nullptr;
  };
  std::string missing;
#define MEMSCOPE_CU_RESOLVE(name, version, required, ret, params)         \
  driver.name = reinterpret_cast<cu::PFN_##name>(lookup(#name, version)); \
  if ((required) && driver.name == nullptr && missing.empty()) missing = #name;
  MEMSCOPE_CUDA_DRIVER_FUNCTIONS(MEMSCOPE_CU_RESOLVE)
#undef MEMSCOPE_CU_RESOLVE
  return missing;
}

std::string version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

}  // namespace

DriverLoad load_cuda_driver(const std::string& path) {
  // glibc keeps dlerror() state per thread, so these calls are safe from any thread.
  dlerror();  // NOLINT(concurrency-mt-unsafe): clears any stale message
  LibraryHandle handle(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (handle.get() == nullptr) {
    const char* why = dlerror();  // NOLINT(concurrency-mt-unsafe)
    return failure(DriverStatus::not_found,
                   "the CUDA driver library '" + path + "' could not be loaded (" +
                       (why != nullptr ? why : "unknown dlopen error") +
                       "); install the NVIDIA driver, or point MEMSCOPE_CUDA_DRIVER at "
                       "libcuda.so.1");
  }
  auto init = find_symbol<cu::PFN_cuInit>(handle.get(), "cuInit");
  auto get_version = find_symbol<cu::PFN_cuDriverGetVersion>(handle.get(), "cuDriverGetVersion");
  if (init == nullptr || get_version == nullptr) {
    return failure(DriverStatus::too_old,
                   "'" + path + "' is not a CUDA driver library (no cuInit/cuDriverGetVersion)");
  }
  const cu::CUresult init_result = init(0);
  if (init_result == cu::CUDA_ERROR_STUB_LIBRARY) {
    return failure(DriverStatus::stub,
                   "'" + path + "' is the CUDA toolkit's stub driver (cuInit returned " +
                       describe_cuda_error(nullptr, init_result) +
                       "), which exists only for linking; install the NVIDIA driver and make "
                       "sure the stubs directory is not on LD_LIBRARY_PATH");
  }
  // From here on the library stays loaded, whatever else fails: cuInit may have started threads
  // or registered exit handlers inside it, and unloading it under them would crash the process
  // later. (Only the stub, refused above, is safe and important to unload.)
  void* const library = handle.get();
  handle.keep();
  auto driver = std::make_shared<CudaDriver>();
  driver->path = path;
  // Names and strings of later errors need cuGetErrorName; resolve before judging cuInit.
  const std::string missing = resolve_functions(library, *driver);
  if (init_result != cu::CUDA_SUCCESS) {
    const CudaDriver* named = driver->cuGetErrorName != nullptr ? driver.get() : nullptr;
    return failure(DriverStatus::init_failed,
                   "cuInit failed in '" + path + "': " + describe_cuda_error(named, init_result) +
                       " (no usable GPU: check nvidia-smi, the kernel module and "
                       "CUDA_VISIBLE_DEVICES)");
  }
  register_shutdown_flag();
  if (get_version(&driver->version) != cu::CUDA_SUCCESS) driver->version = 0;
  if (!missing.empty()) {
    return failure(DriverStatus::too_old, "the CUDA driver in '" + path + "' (version " +
                                              version_text(driver->version) + ") lacks " + missing +
                                              "; memscope needs a CUDA 11.3 or newer "
                                              "driver");
  }
  return DriverLoad{DriverStatus::loaded, "", std::move(driver)};
}

const DriverLoad& cuda_driver() {
  static const DriverLoad load = [] {
    // getenv is read once, before any thread of ours could change the environment.
    const char* override_path =
        std::getenv("MEMSCOPE_CUDA_DRIVER");  // NOLINT(concurrency-mt-unsafe)
    const bool use_override = override_path != nullptr && *override_path != '\0';
    return load_cuda_driver(use_override ? std::string(override_path)
                                         : std::string(kCudaDriverLibrary));
  }();
  return load;
}

bool cuda_driver_shutting_down() noexcept {
  return g_shutting_down.load();
}

void check_cuda(const CudaDriver& driver, cu::CUresult result, std::string_view what) {
  if (result == cu::CUDA_SUCCESS) return;
  throw BackendError(std::string(what) + " failed: " + describe_cuda_error(&driver, result));
}

}  // namespace memscope::detail
