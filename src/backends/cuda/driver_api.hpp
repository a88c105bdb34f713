// The slice of the CUDA driver API that memscope uses, declared here so that the library builds
// where no CUDA headers are installed and links no CUDA library: the driver is loaded at run
// time (driver_loader.hpp).
//
// Every type, constant and function-pointer type below mirrors cuda.h exactly; the test
// tests/backends/cuda/driver_abi_test.cpp includes the toolkit's cuda.h next to this file and
// static_asserts that they match, wherever the toolkit is installed. Keep names as in cuda.h
// (so the check can pair them) inside namespace memscope::cu.
#pragma once

#include <cstddef>
#include <cstdint>

namespace memscope::cu {

// The driver's status codes. Only the ones memscope names are listed; the enum has a fixed
// underlying type (the one compilers pick for cuda.h's enum), so any other code the driver
// returns is still a valid value.
enum CUresult : unsigned int {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_DEINITIALIZED = 4,
  CUDA_ERROR_STUB_LIBRARY = 34,
  CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER = 36,
  CUDA_ERROR_DEVICE_UNAVAILABLE = 46,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_INVALID_PTX = 218,
  CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
  CUDA_ERROR_OPERATING_SYSTEM = 304,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
  CUDA_ERROR_LAUNCH_FAILED = 719,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803,
  CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804,
  CUDA_ERROR_UNKNOWN = 999,
};

enum CUdriverProcAddress_flags : unsigned int {
  CU_GET_PROC_ADDRESS_DEFAULT = 0,
  CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1U << 0U,
  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 1U << 1U,
};

enum CUdriverProcAddressQueryResult : unsigned int {
  CU_GET_PROC_ADDRESS_SUCCESS = 0,
  CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
  CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
};

enum CUevent_flags : unsigned int {
  CU_EVENT_DEFAULT = 0x0,
  CU_EVENT_BLOCKING_SYNC = 0x1,
  CU_EVENT_DISABLE_TIMING = 0x2,
};

enum CUstream_flags : unsigned int {
  CU_STREAM_DEFAULT = 0x0,
  CU_STREAM_NON_BLOCKING = 0x1,
};

// Virtual memory management (cuMemAddressReserve, cuMemCreate, cuMemMap: CUDA 10.2), for
// expandable segments. Only the values memscope passes are listed.
enum CUmemAllocationType : unsigned int {
  CU_MEM_ALLOCATION_TYPE_PINNED = 0x1,
};
enum CUmemAllocationHandleType : unsigned int {
  CU_MEM_HANDLE_TYPE_NONE = 0x0,
};
enum CUmemLocationType : unsigned int {
  CU_MEM_LOCATION_TYPE_DEVICE = 0x1,
};
enum CUmemAccess_flags : unsigned int {
  CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 0x3,
};
enum CUmemAllocationGranularity_flags : unsigned int {
  CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0x0,
};
enum CUdevice_attribute : unsigned int {
  CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
};

using cuuint64_t = std::uint64_t;
using CUdevice = int;                    // cuda.h: CUdevice_v1
using CUdeviceptr = unsigned long long;  // cuda.h: CUdeviceptr_v2 (64-bit builds only)

struct CUctx_st;
struct CUstream_st;
struct CUevent_st;
struct CUmod_st;
struct CUfunc_st;
using CUcontext = CUctx_st*;
using CUstream = CUstream_st*;
using CUevent = CUevent_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;

struct CUuuid {
  char bytes[16];
};

using CUmemGenericAllocationHandle = unsigned long long;  // cuda.h: ..._v1

struct CUmemLocation {
  CUmemLocationType type;
  int id;  // the device ordinal, for CU_MEM_LOCATION_TYPE_DEVICE
};

struct CUmemAllocationProp {
  CUmemAllocationType type;
  CUmemAllocationHandleType requestedHandleTypes;
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};

struct CUmemAccessDesc {
  CUmemLocation location;
  CUmemAccess_flags flags;
};

// The two entry points we find with dlsym; everything else comes from cuGetProcAddress.
using PFN_cuGetProcAddress_v2 = CUresult (*)(const char* symbol, void** pfn, int cuda_version,
                                             cuuint64_t flags,
                                             CUdriverProcAddressQueryResult* symbol_status);
using PFN_cuGetProcAddress_v1 = CUresult (*)(const char* symbol, void** pfn, int cuda_version,
                                             cuuint64_t flags);

// X(name, cuda_version, required, return_type, (parameters))
// cuda_version is the CUDA version whose ABI of `name` we declare: cuGetProcAddress is asked
// for exactly that version, so a newer driver hands us the same variant (cuMemAlloc at 3020 is
// cuMemAlloc_v2; cuCtxSynchronize at 2000 is the one without a context argument). cuda.h's
// matching type is PFN_<name>_v<cuda_version>. `required` functions must resolve for the
// backend to load; the others (streams, copies, modules: used by tests and probes; the virtual
// memory functions, whose absence only turns page mapping off) may be null.
// clang-format off
#define MEMSCOPE_CUDA_DRIVER_FUNCTIONS(X)                                                              \
  X(cuGetErrorName, 6000, true, CUresult, (CUresult error, const char** str))                          \
  X(cuGetErrorString, 6000, true, CUresult, (CUresult error, const char** str))                        \
  X(cuDeviceGet, 2000, true, CUresult, (CUdevice* device, int ordinal))                                \
  X(cuDeviceGetCount, 2000, true, CUresult, (int* count))                                              \
  X(cuDeviceGetName, 2000, true, CUresult, (char* name, int len, CUdevice dev))                        \
  X(cuDeviceTotalMem, 3020, true, CUresult, (std::size_t* bytes, CUdevice dev))                        \
  X(cuDevicePrimaryCtxRetain, 7000, true, CUresult, (CUcontext* ctx, CUdevice dev))                    \
  X(cuDevicePrimaryCtxRelease, 11000, true, CUresult, (CUdevice dev))                                  \
  X(cuCtxGetCurrent, 4000, true, CUresult, (CUcontext* ctx))                                           \
  X(cuCtxPushCurrent, 4000, true, CUresult, (CUcontext ctx))                                           \
  X(cuCtxPopCurrent, 4000, true, CUresult, (CUcontext* ctx))                                           \
  X(cuMemAlloc, 3020, true, CUresult, (CUdeviceptr* dptr, std::size_t bytesize))                       \
  X(cuMemFree, 3020, true, CUresult, (CUdeviceptr dptr))                                               \
  X(cuMemGetInfo, 3020, true, CUresult, (std::size_t* free, std::size_t* total))                       \
  X(cuEventCreate, 2000, true, CUresult, (CUevent* event, unsigned int flags))                         \
  X(cuEventDestroy, 4000, true, CUresult, (CUevent event))                                             \
  X(cuEventRecord, 2000, true, CUresult, (CUevent event, CUstream stream))                             \
  X(cuEventQuery, 2000, true, CUresult, (CUevent event))                                               \
  X(cuEventSynchronize, 2000, true, CUresult, (CUevent event))                                         \
  X(cuDeviceGetUuid, 11040, false, CUresult, (CUuuid* uuid, CUdevice dev))                             \
  X(cuDeviceGetPCIBusId, 4010, false, CUresult, (char* bus_id, int len, CUdevice dev))                 \
  X(cuCtxSynchronize, 2000, false, CUresult, ())                                                       \
  X(cuStreamCreate, 2000, false, CUresult, (CUstream* stream, unsigned int flags))                     \
  X(cuStreamDestroy, 4000, false, CUresult, (CUstream stream))                                         \
  X(cuStreamQuery, 2000, false, CUresult, (CUstream stream))                                           \
  X(cuStreamSynchronize, 2000, false, CUresult, (CUstream stream))                                     \
  X(cuDeviceGetAttribute, 2000, false, CUresult,                                                       \
    (int* value, CUdevice_attribute attrib, CUdevice dev))                                             \
  X(cuMemGetAllocationGranularity, 10020, false, CUresult,                                             \
    (std::size_t* granularity, const CUmemAllocationProp* prop,                                        \
     CUmemAllocationGranularity_flags option))                                                         \
  X(cuMemAddressReserve, 10020, false, CUresult,                                                       \
    (CUdeviceptr* ptr, std::size_t size, std::size_t alignment, CUdeviceptr addr,                      \
     unsigned long long flags))                                                                        \
  X(cuMemAddressFree, 10020, false, CUresult, (CUdeviceptr ptr, std::size_t size))                     \
  X(cuMemCreate, 10020, false, CUresult,                                                               \
    (CUmemGenericAllocationHandle* handle, std::size_t size, const CUmemAllocationProp* prop,          \
     unsigned long long flags))                                                                        \
  X(cuMemRelease, 10020, false, CUresult, (CUmemGenericAllocationHandle handle))                       \
  X(cuMemMap, 10020, false, CUresult,                                                                  \
    (CUdeviceptr ptr, std::size_t size, std::size_t offset, CUmemGenericAllocationHandle handle,       \
     unsigned long long flags))                                                                        \
  X(cuMemUnmap, 10020, false, CUresult, (CUdeviceptr ptr, std::size_t size))                           \
  X(cuMemSetAccess, 10020, false, CUresult,                                                            \
    (CUdeviceptr ptr, std::size_t size, const CUmemAccessDesc* desc, std::size_t count))               \
  X(cuMemsetD8Async, 3020, false, CUresult,                                                            \
    (CUdeviceptr dst, unsigned char value, std::size_t count, CUstream stream))                        \
  X(cuMemcpyHtoD, 3020, false, CUresult, (CUdeviceptr dst, const void* src, std::size_t bytes))        \
  X(cuMemcpyDtoH, 3020, false, CUresult, (void* dst, CUdeviceptr src, std::size_t bytes))              \
  X(cuModuleLoadData, 2000, false, CUresult, (CUmodule* module, const void* image))                    \
  X(cuModuleGetFunction, 2000, false, CUresult, (CUfunction* fn, CUmodule module, const char* name))   \
  X(cuModuleUnload, 2000, false, CUresult, (CUmodule module))                                          \
  X(cuLaunchKernel, 4000, false, CUresult,                                                             \
    (CUfunction fn, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,                     \
     unsigned int block_x, unsigned int block_y, unsigned int block_z, unsigned int shared_bytes,      \
     CUstream stream, void** params, void** extra))
// clang-format on

// `params` is a parenthesised list already.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define MEMSCOPE_CU_DECLARE_PFN(name, version, required, ret, params) \
  using PFN_##name = ret(*) params;
MEMSCOPE_CUDA_DRIVER_FUNCTIONS(MEMSCOPE_CU_DECLARE_PFN)
#undef MEMSCOPE_CU_DECLARE_PFN
// NOLINTEND(bugprone-macro-parentheses)

// cuInit and cuDriverGetVersion are found with dlsym (they predate cuGetProcAddress and are
// needed before it, to tell a stub library from a driver).
using PFN_cuInit = CUresult (*)(unsigned int flags);
using PFN_cuDriverGetVersion = CUresult (*)(int* version);
inline constexpr int kCuInitVersion = 2000;
inline constexpr int kCuDriverGetVersionVersion = 2020;

}  // namespace memscope::cu
