// Checks nvml_api.hpp against a real nvml.h: constants, struct layouts and the type of every
// function we resolve, or this file does not compile.
#include "probes/nvml/nvml_api.hpp"
// Without the "unversioned" macros (nvmlInit -> nvmlInit_v2, ...), each name means the symbol
// that dlsym finds under it, which is what we must compare.
#define NVML_NO_UNVERSIONED_FUNC_DEFS
#include <gtest/gtest.h>
#include <nvml.h>

#include <cstddef>
#include <type_traits>

#include "abi_mapping.hpp"

MEMSCOPE_ABI_MAP(memscope::nvml::nvmlReturn_t, ::nvmlReturn_t)
MEMSCOPE_ABI_MAP(memscope::nvml::nvmlDevice_st, ::nvmlDevice_st)
MEMSCOPE_ABI_MAP(memscope::nvml::nvmlMemory_t, ::nvmlMemory_t)
MEMSCOPE_ABI_MAP(memscope::nvml::nvmlMemory_v2_t, ::nvmlMemory_v2_t)
MEMSCOPE_ABI_MAP(memscope::nvml::nvmlProcessInfo_v1_t, ::nvmlProcessInfo_v1_t)
MEMSCOPE_ABI_MAP(memscope::nvml::nvmlProcessInfo_v2_t, ::nvmlProcessInfo_v2_t)

namespace {

namespace ours = memscope::nvml;

using memscope::testing::abi::real_t;

static_assert(std::is_same_v<std::underlying_type_t<ours::nvmlReturn_t>,
                             std::underlying_type_t<::nvmlReturn_t>>);
#define MEMSCOPE_SAME_VALUE(name) \
  static_assert(static_cast<long long>(ours::name) == static_cast<long long>(::name), #name);
MEMSCOPE_SAME_VALUE(NVML_SUCCESS)
MEMSCOPE_SAME_VALUE(NVML_ERROR_UNINITIALIZED)
MEMSCOPE_SAME_VALUE(NVML_ERROR_INVALID_ARGUMENT)
MEMSCOPE_SAME_VALUE(NVML_ERROR_NOT_SUPPORTED)
MEMSCOPE_SAME_VALUE(NVML_ERROR_NO_PERMISSION)
MEMSCOPE_SAME_VALUE(NVML_ERROR_NOT_FOUND)
MEMSCOPE_SAME_VALUE(NVML_ERROR_INSUFFICIENT_SIZE)
MEMSCOPE_SAME_VALUE(NVML_ERROR_DRIVER_NOT_LOADED)
MEMSCOPE_SAME_VALUE(NVML_ERROR_LIBRARY_NOT_FOUND)
MEMSCOPE_SAME_VALUE(NVML_ERROR_FUNCTION_NOT_FOUND)
MEMSCOPE_SAME_VALUE(NVML_ERROR_GPU_IS_LOST)
MEMSCOPE_SAME_VALUE(NVML_ERROR_LIB_RM_VERSION_MISMATCH)
MEMSCOPE_SAME_VALUE(NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
MEMSCOPE_SAME_VALUE(NVML_ERROR_UNKNOWN)
#undef MEMSCOPE_SAME_VALUE
static_assert(ours::kMemoryV2Version == nvmlMemory_v2);
static_assert(ours::kValueNotAvailable ==
              static_cast<unsigned long long>(NVML_VALUE_NOT_AVAILABLE));
static_assert(ours::kDeviceNameBufferSize == NVML_DEVICE_NAME_V2_BUFFER_SIZE);
static_assert(ours::kDeviceUuidBufferSize == NVML_DEVICE_UUID_V2_BUFFER_SIZE);
static_assert(ours::kDriverVersionBufferSize == NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE);

// Field by field: same offsets and sizes, so reading NVML's buffers through our structs is exact.
#define MEMSCOPE_SAME_FIELD(type, field)                                                   \
  static_assert(offsetof(ours::type, field) == offsetof(::type, field), #type "." #field); \
  static_assert(sizeof(ours::type::field) == sizeof(::type::field), #type "." #field);
MEMSCOPE_SAME_FIELD(nvmlMemory_t, total)
MEMSCOPE_SAME_FIELD(nvmlMemory_t, free)
MEMSCOPE_SAME_FIELD(nvmlMemory_t, used)
MEMSCOPE_SAME_FIELD(nvmlMemory_v2_t, version)
MEMSCOPE_SAME_FIELD(nvmlMemory_v2_t, total)
MEMSCOPE_SAME_FIELD(nvmlMemory_v2_t, reserved)
MEMSCOPE_SAME_FIELD(nvmlMemory_v2_t, free)
MEMSCOPE_SAME_FIELD(nvmlMemory_v2_t, used)
MEMSCOPE_SAME_FIELD(nvmlProcessInfo_v1_t, pid)
MEMSCOPE_SAME_FIELD(nvmlProcessInfo_v1_t, usedGpuMemory)
MEMSCOPE_SAME_FIELD(nvmlProcessInfo_v2_t, pid)
MEMSCOPE_SAME_FIELD(nvmlProcessInfo_v2_t, usedGpuMemory)
MEMSCOPE_SAME_FIELD(nvmlProcessInfo_v2_t, gpuInstanceId)
MEMSCOPE_SAME_FIELD(nvmlProcessInfo_v2_t, computeInstanceId)
#undef MEMSCOPE_SAME_FIELD
static_assert(sizeof(ours::nvmlMemory_t) == sizeof(::nvmlMemory_t));
static_assert(sizeof(ours::nvmlMemory_v2_t) == sizeof(::nvmlMemory_v2_t));
static_assert(sizeof(ours::nvmlProcessInfo_v1_t) == sizeof(::nvmlProcessInfo_v1_t));
static_assert(sizeof(ours::nvmlProcessInfo_v2_t) == sizeof(::nvmlProcessInfo_t));

// Every function we dlsym has exactly the type nvml.h declares under that name.
#define MEMSCOPE_SAME_FUNCTION(name, required, ret, params)                  \
  static_assert(std::is_same_v<real_t<ours::PFN_##name>, decltype(&::name)>, \
                #name " differs from nvml.h");
MEMSCOPE_NVML_FUNCTIONS(MEMSCOPE_SAME_FUNCTION)
#undef MEMSCOPE_SAME_FUNCTION

TEST(NvmlAbi, DeclarationsMatchNvmlHeader) {
  RecordProperty("nvml_api_version", NVML_API_VERSION);
  SUCCEED() << "checked against nvml.h (NVML_API_VERSION " << NVML_API_VERSION << ")";
}

}  // namespace
