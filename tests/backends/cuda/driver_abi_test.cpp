// Checks driver_api.hpp against the toolkit's own cuda.h and cudaTypedefs.h: every constant,
// every type and every function-pointer type must match, or this file does not compile.
//
// driver_api.hpp comes first on purpose: cuda.h #defines names such as cuMemAlloc to their
// versioned symbols, and our header must be read as the library reads it, without them.
#include "backends/cuda/driver_api.hpp"
// clang-format off
#include <cuda.h>
#include <cudaTypedefs.h>
// clang-format on

#include <gtest/gtest.h>

#include <cstddef>
#include <type_traits>

#include "abi_mapping.hpp"

MEMSCOPE_ABI_MAP(memscope::cu::CUresult, ::CUresult)
MEMSCOPE_ABI_MAP(memscope::cu::CUdriverProcAddressQueryResult, ::CUdriverProcAddressQueryResult)
MEMSCOPE_ABI_MAP(memscope::cu::CUctx_st, ::CUctx_st)
MEMSCOPE_ABI_MAP(memscope::cu::CUstream_st, ::CUstream_st)
MEMSCOPE_ABI_MAP(memscope::cu::CUevent_st, ::CUevent_st)
MEMSCOPE_ABI_MAP(memscope::cu::CUmod_st, ::CUmod_st)
MEMSCOPE_ABI_MAP(memscope::cu::CUfunc_st, ::CUfunc_st)
MEMSCOPE_ABI_MAP(memscope::cu::CUuuid, ::CUuuid)
MEMSCOPE_ABI_MAP(memscope::cu::CUmemAllocationProp, ::CUmemAllocationProp)
MEMSCOPE_ABI_MAP(memscope::cu::CUmemAccessDesc, ::CUmemAccessDesc)
MEMSCOPE_ABI_MAP(memscope::cu::CUmemAllocationGranularity_flags, ::CUmemAllocationGranularity_flags)
MEMSCOPE_ABI_MAP(memscope::cu::CUdevice_attribute, ::CUdevice_attribute)

namespace {

namespace cu = memscope::cu;

using memscope::testing::abi::real_t;

// Scalar types and structs.
static_assert(std::is_same_v<cu::CUdevice, ::CUdevice>);
static_assert(std::is_same_v<cu::CUdeviceptr, ::CUdeviceptr>);
static_assert(std::is_same_v<cu::cuuint64_t, ::cuuint64_t>);
static_assert(sizeof(cu::CUuuid) == sizeof(::CUuuid) && alignof(cu::CUuuid) == alignof(::CUuuid));
static_assert(std::is_same_v<real_t<cu::CUcontext>, ::CUcontext>);
static_assert(std::is_same_v<real_t<cu::CUstream>, ::CUstream>);
static_assert(std::is_same_v<real_t<cu::CUevent>, ::CUevent>);
static_assert(std::is_same_v<real_t<cu::CUmodule>, ::CUmodule>);
static_assert(std::is_same_v<real_t<cu::CUfunction>, ::CUfunction>);

// The virtual memory management structs: same size, alignment and field offsets.
static_assert(std::is_same_v<cu::CUmemGenericAllocationHandle, ::CUmemGenericAllocationHandle>);
#define MEMSCOPE_SAME_LAYOUT(ours, theirs)                                                      \
  static_assert(sizeof(cu::ours) == sizeof(::theirs) && alignof(cu::ours) == alignof(::theirs), \
                #ours " differs from cuda.h");
#define MEMSCOPE_SAME_OFFSET(ours, theirs, field)                       \
  static_assert(offsetof(cu::ours, field) == offsetof(::theirs, field), \
                #ours "::" #field " is not where cuda.h puts it");
MEMSCOPE_SAME_LAYOUT(CUmemLocation, CUmemLocation)
MEMSCOPE_SAME_OFFSET(CUmemLocation, CUmemLocation, type)
MEMSCOPE_SAME_OFFSET(CUmemLocation, CUmemLocation, id)
MEMSCOPE_SAME_LAYOUT(CUmemAllocationProp, CUmemAllocationProp)
MEMSCOPE_SAME_OFFSET(CUmemAllocationProp, CUmemAllocationProp, type)
MEMSCOPE_SAME_OFFSET(CUmemAllocationProp, CUmemAllocationProp, requestedHandleTypes)
MEMSCOPE_SAME_OFFSET(CUmemAllocationProp, CUmemAllocationProp, location)
MEMSCOPE_SAME_OFFSET(CUmemAllocationProp, CUmemAllocationProp, win32HandleMetaData)
MEMSCOPE_SAME_OFFSET(CUmemAllocationProp, CUmemAllocationProp, allocFlags)
MEMSCOPE_SAME_OFFSET(CUmemAllocationProp, CUmemAllocationProp, allocFlags.usage)
MEMSCOPE_SAME_OFFSET(CUmemAllocationProp, CUmemAllocationProp, allocFlags.reserved)
MEMSCOPE_SAME_LAYOUT(CUmemAccessDesc, CUmemAccessDesc)
MEMSCOPE_SAME_OFFSET(CUmemAccessDesc, CUmemAccessDesc, location)
MEMSCOPE_SAME_OFFSET(CUmemAccessDesc, CUmemAccessDesc, flags)
#undef MEMSCOPE_SAME_OFFSET
#undef MEMSCOPE_SAME_LAYOUT
static_assert(std::is_same_v<decltype(cu::CUmemLocation::type), cu::CUmemLocationType>);
static_assert(std::is_same_v<std::underlying_type_t<cu::CUmemLocationType>,
                             std::underlying_type_t<::CUmemLocationType>>);
static_assert(std::is_same_v<std::underlying_type_t<cu::CUmemAllocationType>,
                             std::underlying_type_t<::CUmemAllocationType>>);
static_assert(std::is_same_v<std::underlying_type_t<cu::CUmemAllocationHandleType>,
                             std::underlying_type_t<::CUmemAllocationHandleType>>);
static_assert(std::is_same_v<std::underlying_type_t<cu::CUmemAccess_flags>,
                             std::underlying_type_t<::CUmemAccess_flags>>);
static_assert(std::is_same_v<std::underlying_type_t<cu::CUmemAllocationGranularity_flags>,
                             std::underlying_type_t<::CUmemAllocationGranularity_flags>>);
static_assert(std::is_same_v<std::underlying_type_t<cu::CUdevice_attribute>,
                             std::underlying_type_t<::CUdevice_attribute>>);

// Enums: same size, same underlying type, and every enumerator we declare has cuda.h's value.
static_assert(
    std::is_same_v<std::underlying_type_t<cu::CUresult>, std::underlying_type_t<::CUresult>>);
static_assert(std::is_same_v<std::underlying_type_t<cu::CUdriverProcAddressQueryResult>,
                             std::underlying_type_t<::CUdriverProcAddressQueryResult>>);
#define MEMSCOPE_SAME_VALUE(name)                                                   \
  static_assert(static_cast<long long>(cu::name) == static_cast<long long>(::name), \
                #name " differs from cuda.h");
MEMSCOPE_SAME_VALUE(CUDA_SUCCESS)
MEMSCOPE_SAME_VALUE(CUDA_ERROR_INVALID_VALUE)
MEMSCOPE_SAME_VALUE(CUDA_ERROR_OUT_OF_MEMORY)
MEMSCOPE_SAME_VALUE(CUDA_ERROR_NOT_INITIALIZED)
MEMSCOPE_SAME_VALUE(CUDA_ERROR_DEINITIALIZED)
MEMSCOPE_SAME_VALUE(CUDA_ERROR_STUB_LIBRARY)
MEMSCOPE_SAME_VALUE(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER)
MEMSCOPE_SAME_VALUE(CUDA_ERROR_DEVICE_UNAVAILABLE)
MEMSCOPE_SAME_VALUE(CUDA_ERROR_NO_DEVICE)
MEMSCOPE_SAME_VALUE(CUDA_ERROR_INVALID_DEVICE)
MEMSCOPE_SAME_VALUE(CUDA_ERROR_INVALID_CONTEXT)
MEMSCOPE_SAME_VALUE(CUDA_ERROR_INVALID_PTX)
MEMSCOPE_SAME_VALUE(CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
MEMSCOPE_SAME_VALUE(CUDA_ERROR_OPERATING_SYSTEM)
MEMSCOPE_SAME_VALUE(CUDA_ERROR_INVALID_HANDLE)
MEMSCOPE_SAME_VALUE(CUDA_ERROR_NOT_FOUND)
MEMSCOPE_SAME_VALUE(CUDA_ERROR_NOT_READY)
MEMSCOPE_SAME_VALUE(CUDA_ERROR_ILLEGAL_ADDRESS)
MEMSCOPE_SAME_VALUE(CUDA_ERROR_CONTEXT_IS_DESTROYED)
MEMSCOPE_SAME_VALUE(CUDA_ERROR_LAUNCH_FAILED)
MEMSCOPE_SAME_VALUE(CUDA_ERROR_NOT_SUPPORTED)
MEMSCOPE_SAME_VALUE(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)
MEMSCOPE_SAME_VALUE(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE)
MEMSCOPE_SAME_VALUE(CUDA_ERROR_UNKNOWN)
MEMSCOPE_SAME_VALUE(CU_GET_PROC_ADDRESS_DEFAULT)
MEMSCOPE_SAME_VALUE(CU_GET_PROC_ADDRESS_LEGACY_STREAM)
MEMSCOPE_SAME_VALUE(CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
MEMSCOPE_SAME_VALUE(CU_GET_PROC_ADDRESS_SUCCESS)
MEMSCOPE_SAME_VALUE(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND)
MEMSCOPE_SAME_VALUE(CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT)
MEMSCOPE_SAME_VALUE(CU_EVENT_DEFAULT)
MEMSCOPE_SAME_VALUE(CU_EVENT_BLOCKING_SYNC)
MEMSCOPE_SAME_VALUE(CU_EVENT_DISABLE_TIMING)
MEMSCOPE_SAME_VALUE(CU_STREAM_DEFAULT)
MEMSCOPE_SAME_VALUE(CU_STREAM_NON_BLOCKING)
MEMSCOPE_SAME_VALUE(CU_MEM_ALLOCATION_TYPE_PINNED)
MEMSCOPE_SAME_VALUE(CU_MEM_HANDLE_TYPE_NONE)
MEMSCOPE_SAME_VALUE(CU_MEM_LOCATION_TYPE_DEVICE)
MEMSCOPE_SAME_VALUE(CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
MEMSCOPE_SAME_VALUE(CU_MEM_ALLOC_GRANULARITY_MINIMUM)
MEMSCOPE_SAME_VALUE(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)
#undef MEMSCOPE_SAME_VALUE

// Function-pointer types: ours, translated, must be cudaTypedefs.h's PFN_<name>_v<version>,
// which is also the version the loader asks cuGetProcAddress for.
#define MEMSCOPE_SAME_PFN(name, version, required, ret, params)                    \
  static_assert(std::is_same_v<real_t<cu::PFN_##name>, ::PFN_##name##_v##version>, \
                #name " (version " #version ") differs from cudaTypedefs.h");
MEMSCOPE_CUDA_DRIVER_FUNCTIONS(MEMSCOPE_SAME_PFN)
#undef MEMSCOPE_SAME_PFN
static_assert(std::is_same_v<real_t<cu::PFN_cuGetProcAddress_v2>, ::PFN_cuGetProcAddress_v12000>);
static_assert(std::is_same_v<real_t<cu::PFN_cuGetProcAddress_v1>, ::PFN_cuGetProcAddress_v11030>);
static_assert(std::is_same_v<real_t<cu::PFN_cuInit>, ::PFN_cuInit_v2000>);
static_assert(std::is_same_v<real_t<cu::PFN_cuDriverGetVersion>, ::PFN_cuDriverGetVersion_v2020>);
static_assert(cu::kCuInitVersion == 2000 && cu::kCuDriverGetVersionVersion == 2020);

TEST(CudaDriverAbi, DeclarationsMatchTheToolkitHeaders) {
  // Everything is checked at compile time; reaching here means cuda.h CUDA_VERSION agreed.
  RecordProperty("cuda_h_version", CUDA_VERSION);
  SUCCEED() << "checked against cuda.h of CUDA " << CUDA_VERSION;
}

}  // namespace
