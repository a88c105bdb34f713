// Turning CUresult codes into text. The driver's own cuGetErrorName/cuGetErrorString are
// preferred; a small built-in table covers the codes we can meet when the driver cannot answer
// (the stub library answers every call with CUDA_ERROR_STUB_LIBRARY, and cuInit can fail before
// the driver is able to describe anything).
#include <string>

#include "backends/cuda/driver_loader.hpp"

namespace memscope::detail {
namespace {

struct KnownError {
  cu::CUresult code;
  const char* name;
  const char* text;
};

constexpr KnownError kKnownErrors[] = {
    {cu::CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {cu::CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {cu::CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {cu::CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {cu::CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {cu::CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {cu::CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER",
     "operation not supported by this driver version"},
    {cu::CUDA_ERROR_DEVICE_UNAVAILABLE, "CUDA_ERROR_DEVICE_UNAVAILABLE",
     "CUDA-capable device(s) is/are busy or unavailable"},
    {cu::CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {cu::CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {cu::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
     "system has unsupported display driver / cuda driver combination"},
    {cu::CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
     "forward compatibility was attempted on non supported HW"},
    {cu::CUDA_ERROR_OPERATING_SYSTEM, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed"},
    {cu::CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {cu::CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

}  // namespace

std::string describe_cuda_error(const CudaDriver* driver, cu::CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (driver != nullptr && driver->cuGetErrorName != nullptr &&
      driver->cuGetErrorName(result, &name) != cu::CUDA_SUCCESS) {
    name = nullptr;
  }
  if (driver != nullptr && driver->cuGetErrorString != nullptr &&
      driver->cuGetErrorString(result, &text) != cu::CUDA_SUCCESS) {
    text = nullptr;
  }
  for (const KnownError& known : kKnownErrors) {
    if (known.code != result) continue;
    if (name == nullptr) name = known.name;
    if (text == nullptr) text = known.text;
  }
  std::string out = name != nullptr ? name : "CUDA error";
  out += " (" + std::to_string(static_cast<unsigned int>(result)) + ")";
  if (text != nullptr) out += std::string(": ") + text;
  return out;
}

}  // namespace memscope::detail
