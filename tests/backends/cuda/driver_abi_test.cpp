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
