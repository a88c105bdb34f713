// Loads the CUDA driver library at run time and resolves the functions of driver_api.hpp.
//
// cuda_driver() loads it once per process: from $MEMSCOPE_CUDA_DRIVER when set (a path, for
// tests and unusual installs), else "libcuda.so.1" through the dynamic linker's usual search.
// It calls cuInit(0) (which reads CUDA_VISIBLE_DEVICES) and never unloads the library: the
// driver keeps threads and state that must outlive every handle it gave out.
//
// load_cuda_driver(path) does the same for one explicit path without touching the process-wide
// state; tests use it to load a missing file or the toolkit's stub library. A failed load
// closes what it opened, so a later load of the real driver is not shadowed by a stub that
// shares its soname.
//
// Thread safety: cuda_driver() is safe to call from any thread (a function-local static).
// Errors: loading never throws; the result says why the driver is unusable.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "backends/cuda/driver_api.hpp"

namespace memscope::detail {

struct CudaDriver {
  std::string path;  // what was passed to dlopen
  int version = 0;   // cuDriverGetVersion: 12040 for a CUDA 12.4 driver
#define MEMSCOPE_CU_MEMBER(name, version, required, ret, params) cu::PFN_##name name = nullptr;
  MEMSCOPE_CUDA_DRIVER_FUNCTIONS(MEMSCOPE_CU_MEMBER)
#undef MEMSCOPE_CU_MEMBER
};

enum class DriverStatus {
  loaded,
  not_found,    // dlopen failed: no driver installed, or not on the library path
  stub,         // the toolkit's link-time stub (cuInit returns CUDA_ERROR_STUB_LIBRARY)
  init_failed,  // cuInit failed: no device, driver/kernel module mismatch, ...
  too_old,      // no cuGetProcAddress (driver older than CUDA 11.3) or a required symbol
};

struct DriverLoad {
  DriverStatus status = DriverStatus::not_found;
  std::string reason;  // empty when loaded; else what failed and what would help
  std::shared_ptr<const CudaDriver> driver;  // set only when loaded
};

// The default library name, as the NVIDIA driver installs it.
inline constexpr std::string_view kCudaDriverLibrary = "libcuda.so.1";

[[nodiscard]] DriverLoad load_cuda_driver(const std::string& path);

// The process-wide driver, loaded on first use.
[[nodiscard]] const DriverLoad& cuda_driver();

// "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory". Uses the driver's own name and string when it
// can, and a built-in table otherwise (a stub or a failing driver answers nothing).
[[nodiscard]] std::string describe_cuda_error(const CudaDriver* driver, cu::CUresult result);

// Throws BackendError "<what> failed: <describe_cuda_error>" unless result is CUDA_SUCCESS.
void check_cuda(const CudaDriver& driver, cu::CUresult result, std::string_view what);

// True once the process has begun to exit after the driver was loaded (an atexit handler
// registered right after cuInit sets it). From then on, releases skip driver calls: the driver
// may already be torn down, and the operating system reclaims device memory with the process.
[[nodiscard]] bool cuda_driver_shutting_down() noexcept;

}  // namespace memscope::detail
