// Opening devices and answering device-level questions through the driver.
#include "backends/cuda/device_query.hpp"

#include <cstdlib>
#include <cstring>

#include "backends/cuda/scoped_context.hpp"
#include "memscope/cuda_backend.hpp"
#include "memscope/errors.hpp"

namespace memscope {
namespace detail {

namespace {

std::string visible_devices_note() {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");  // NOLINT(concurrency-mt-unsafe)
  return visible != nullptr ? std::string(" (CUDA_VISIBLE_DEVICES=\"") + visible + "\")"
                            : std::string();
}

}  // namespace

OpenedDevice open_cuda_device(int index) {
  const std::string label = "cuda:" + std::to_string(index);
  const DriverLoad& load = cuda_driver();
  if (load.status != DriverStatus::loaded) {
    throw BackendUnavailableError(label + ": CUDA is unavailable: " + load.reason);
  }
  const CudaDriver& driver = *load.driver;
  int count = 0;
  const cu::CUresult counted = driver.cuDeviceGetCount(&count);
  if (counted != cu::CUDA_SUCCESS) {
    throw BackendUnavailableError(
        label + ": cuDeviceGetCount failed: " + describe_cuda_error(&driver, counted));
  }
  if (index < 0 || index >= count) {
    throw BackendUnavailableError(label + ": no such device; this process sees " +
                                  std::to_string(count) + " CUDA device(s)" +
                                  visible_devices_note());
  }
  OpenedDevice opened;
  opened.driver = load.driver;
  check_cuda(driver, driver.cuDeviceGet(&opened.device, index), label + ": cuDeviceGet");
  char name[256] = {};
  check_cuda(driver, driver.cuDeviceGetName(name, sizeof(name) - 1, opened.device),
             label + ": cuDeviceGetName");
  opened.name = name;
  return opened;
}

CudaMemInfo cuda_mem_get_info(int index) {
  const OpenedDevice opened = open_cuda_device(index);
  const CudaDriver& driver = *opened.driver;
  const std::string label = "cuda:" + std::to_string(index);
  cu::CUcontext context = nullptr;
  check_cuda(driver, driver.cuDevicePrimaryCtxRetain(&context, opened.device),
             label + ": cuDevicePrimaryCtxRetain");
  CudaMemInfo info;
  cu::CUresult result = cu::CUDA_SUCCESS;
  {
    ScopedContext scope(driver, context, std::nothrow);
    result =
        scope.ok() ? driver.cuMemGetInfo(&info.free, &info.total) : cu::CUDA_ERROR_INVALID_CONTEXT;
  }
  (void)driver.cuDevicePrimaryCtxRelease(opened.device);
  check_cuda(driver, result, label + ": cuMemGetInfo");
  return info;
}

std::string format_gpu_uuid(const unsigned char (&bytes)[16]) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "GPU-";
  for (std::size_t i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += kHex[bytes[i] >> 4U];
    out += kHex[bytes[i] & 0xFU];
  }
  return out;
}

std::string cuda_device_uuid(int index) {
  const OpenedDevice opened = open_cuda_device(index);
  const CudaDriver& driver = *opened.driver;
  if (driver.cuDeviceGetUuid == nullptr) {
    throw BackendUnavailableError("cuda:" + std::to_string(index) +
                                  ": the driver lacks cuDeviceGetUuid (needs CUDA 11.4+)");
  }
  cu::CUuuid uuid{};
  check_cuda(driver, driver.cuDeviceGetUuid(&uuid, opened.device),
             "cuda:" + std::to_string(index) + ": cuDeviceGetUuid");
  unsigned char bytes[16];
  std::memcpy(bytes, uuid.bytes, sizeof(bytes));
  return format_gpu_uuid(bytes);
}

}  // namespace detail

Availability cuda_available() noexcept {
  try {
    const detail::DriverLoad& load = detail::cuda_driver();
    if (load.status != detail::DriverStatus::loaded) return {false, load.reason};
    int count = 0;
    const cu::CUresult result = load.driver->cuDeviceGetCount(&count);
    if (result != cu::CUDA_SUCCESS) {
      return {false,
              "cuDeviceGetCount failed: " + detail::describe_cuda_error(load.driver.get(), result)};
    }
    if (count == 0)
      return {false, "the CUDA driver sees no device" + detail::visible_devices_note()};
    return {true, ""};
  } catch (const std::exception& error) {  // only allocation failures can land here
    return {false, error.what()};
  }
}

int cuda_device_count() noexcept {
  const detail::DriverLoad& load = detail::cuda_driver();
  int count = 0;
  if (load.status != detail::DriverStatus::loaded ||
      load.driver->cuDeviceGetCount(&count) != cu::CUDA_SUCCESS) {
    return 0;
  }
  return count;
}

int cuda_driver_version() noexcept {
  const detail::DriverLoad& load = detail::cuda_driver();
  return load.status == detail::DriverStatus::loaded ? load.driver->version : 0;
}

}  // namespace memscope
