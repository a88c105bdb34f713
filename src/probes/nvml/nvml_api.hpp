// The slice of NVML (libnvidia-ml.so.1) that memscope uses, declared here so that nothing needs
// nvml.h to build. Names and layouts mirror nvml.h; tests/probes/nvml/nvml_abi_test.cpp checks
// them against the real header wherever one is found (MEMSCOPE_NVML_INCLUDE_DIR, or the CUDA
// toolkit's include folder).
#pragma once

#include <cstddef>

namespace memscope::nvml {

// Fixed underlying type (the one compilers pick for nvml.h's enum), so any code NVML returns is
// a valid value.
enum nvmlReturn_t : unsigned int {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_UNKNOWN = 999,
};

struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;

struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;  // includes memory the driver reserves for itself
};

struct nvmlMemory_v2_t {
  unsigned int version;  // must be kMemoryV2Version
  unsigned long long total;
  unsigned long long reserved;  // set aside by the driver and firmware
  unsigned long long free;
  unsigned long long used;  // allocated, without `reserved`
};

// NVML_STRUCT_VERSION(Memory, 2): the struct's size with the version in the top byte.
inline constexpr unsigned int kMemoryV2Version =
    static_cast<unsigned int>(sizeof(nvmlMemory_v2_t)) | (2U << 24U);

// What nvmlDeviceGetComputeRunningProcesses (v1) fills.
struct nvmlProcessInfo_v1_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
};

// What the _v2 and _v3 entry points fill (nvml.h calls it nvmlProcessInfo_t too).
struct nvmlProcessInfo_v2_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;      // 0xFFFFFFFF unless MIG is enabled
  unsigned int computeInstanceId;  // 0xFFFFFFFF unless MIG is enabled
};

// usedGpuMemory when NVML cannot tell (NVML_VALUE_NOT_AVAILABLE, -1 as unsigned long long).
inline constexpr unsigned long long kValueNotAvailable = ~0ULL;

inline constexpr unsigned int kDeviceNameBufferSize = 96;     // NVML_DEVICE_NAME_V2_BUFFER_SIZE
inline constexpr unsigned int kDeviceUuidBufferSize = 96;     // NVML_DEVICE_UUID_V2_BUFFER_SIZE
inline constexpr unsigned int kDriverVersionBufferSize = 80;  // ..._DRIVER_VERSION_BUFFER_SIZE

// X(name, required, return_type, (parameters)). Optional entries may be null: the loader falls
// back from the newest to the oldest variant of each query.
// clang-format off
#define MEMSCOPE_NVML_FUNCTIONS(X)                                                                 \
  X(nvmlInit_v2, true, nvmlReturn_t, ())                                                           \
  X(nvmlShutdown, true, nvmlReturn_t, ())                                                          \
  X(nvmlErrorString, true, const char*, (nvmlReturn_t result))                                     \
  X(nvmlSystemGetDriverVersion, true, nvmlReturn_t, (char* version, unsigned int length))          \
  X(nvmlDeviceGetCount_v2, true, nvmlReturn_t, (unsigned int* count))                              \
  X(nvmlDeviceGetHandleByIndex_v2, true, nvmlReturn_t, (unsigned int index, nvmlDevice_t* device)) \
  X(nvmlDeviceGetName, true, nvmlReturn_t, (nvmlDevice_t device, char* name, unsigned int length)) \
  X(nvmlDeviceGetUUID, true, nvmlReturn_t, (nvmlDevice_t device, char* uuid, unsigned int length)) \
  X(nvmlDeviceGetMemoryInfo, true, nvmlReturn_t, (nvmlDevice_t device, nvmlMemory_t* memory))      \
  X(nvmlDeviceGetMemoryInfo_v2, false, nvmlReturn_t,                                               \
    (nvmlDevice_t device, nvmlMemory_v2_t* memory))                                                \
  X(nvmlDeviceGetComputeRunningProcesses_v3, false, nvmlReturn_t,                                  \
    (nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_v2_t* infos))                       \
  X(nvmlDeviceGetComputeRunningProcesses_v2, false, nvmlReturn_t,                                  \
    (nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_v2_t* infos))                       \
  X(nvmlDeviceGetComputeRunningProcesses, false, nvmlReturn_t,                                     \
    (nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_v1_t* infos))
// clang-format on

// `params` is a parenthesised list already. NOLINTNEXTLINE(bugprone-macro-parentheses)
#define MEMSCOPE_NVML_DECLARE_PFN(name, required, ret, params) using PFN_##name = ret(*) params;
MEMSCOPE_NVML_FUNCTIONS(MEMSCOPE_NVML_DECLARE_PFN)
#undef MEMSCOPE_NVML_DECLARE_PFN

}  // namespace memscope::nvml
