// Per-process records of each NVML struct version, and the grow-and-retry list protocol.
#include "probes/nvml/process_info.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "memscope/errors.hpp"

namespace {

namespace nvml = memscope::nvml;
using memscope::detail::NvmlLibrary;
using memscope::detail::read_nvml_list;

TEST(NvmlProcessInfo, LayoutsAreNvmlsOwn) {
  // nvml.h: v1 is {pid, usedGpuMemory}; v2/v3 add gpuInstanceId and computeInstanceId.
  EXPECT_EQ(sizeof(nvml::nvmlProcessInfo_v1_t), 16U);
  EXPECT_EQ(sizeof(nvml::nvmlProcessInfo_v2_t), 24U);
  EXPECT_EQ(offsetof(nvml::nvmlProcessInfo_v2_t, usedGpuMemory), 8U);
  EXPECT_EQ(offsetof(nvml::nvmlProcessInfo_v2_t, computeInstanceId), 20U);
  EXPECT_EQ(nvml::kMemoryV2Version, 40U | (2U << 24U));
}

TEST(NvmlProcessInfo, EachVersionBecomesAGpuProcess) {
  const nvml::nvmlProcessInfo_v1_t v1{42, 3ULL << 30U};
  const nvml::nvmlProcessInfo_v2_t v2{43, 1ULL << 20U, 0xFFFFFFFFU, 0xFFFFFFFFU};
  const nvml::nvmlProcessInfo_v2_t unknown{44, nvml::kValueNotAvailable, 1, 0};
  EXPECT_EQ(memscope::detail::to_gpu_process(v1).pid, 42U);
  EXPECT_EQ(memscope::detail::to_gpu_process(v1).used_bytes, std::size_t{3} << 30U);
  EXPECT_EQ(memscope::detail::to_gpu_process(v2).used_bytes, std::size_t{1} << 20U);
  EXPECT_EQ(memscope::detail::to_gpu_process(unknown).used_bytes, std::nullopt);
}

// Behaves like NVML's list queries: fills up to *count entries, or says how many it has.
struct GrowingList {
  std::vector<unsigned> pids;
  int calls = 0;
  unsigned grow_after_first_call = 0;  // a process starting between two calls
  nvml::nvmlReturn_t operator()(unsigned int* count, nvml::nvmlProcessInfo_v2_t* buffer) {
    if (calls++ == 1) {
      for (unsigned i = 0; i < grow_after_first_call; ++i) pids.push_back(1000 + i);
    }
    const auto have = static_cast<unsigned int>(pids.size());
    if (*count < have) {
      *count = have;
      return nvml::NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned i = 0; i < have; ++i) buffer[i] = {pids[i], 1024ULL * i, 0, 0};
    *count = have;
    return nvml::NVML_SUCCESS;
  }
};

TEST(NvmlProcessInfo, EmptyListNeedsOneCall) {
  const NvmlLibrary library;
  GrowingList list;
  EXPECT_TRUE(read_nvml_list<nvml::nvmlProcessInfo_v2_t>(library, std::ref(list), "q").empty());
  EXPECT_EQ(list.calls, 1);
}

TEST(NvmlProcessInfo, BufferGrowsUntilEveryProcessFits) {
  const NvmlLibrary library;
  GrowingList list{{7, 8, 9}, 0, 10};  // 3 at first, 13 by the second call
  const auto infos = read_nvml_list<nvml::nvmlProcessInfo_v2_t>(library, std::ref(list), "q");
  ASSERT_EQ(infos.size(), 13U);
  EXPECT_EQ(infos.front().pid, 7U);
  EXPECT_EQ(infos.back().pid, 1009U);
}

TEST(NvmlProcessInfo, OtherErrorsAreTypedAndNamed) {
  const NvmlLibrary library;
  auto failing = [](unsigned int*, nvml::nvmlProcessInfo_v2_t*) {
    return nvml::NVML_ERROR_NO_PERMISSION;
  };
  try {
    (void)read_nvml_list<nvml::nvmlProcessInfo_v2_t>(library, failing, "processes on gpu 0");
    FAIL() << "no error";
  } catch (const memscope::BackendError& error) {
    EXPECT_NE(std::string(error.what()).find("processes on gpu 0 failed"), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("(4)"), std::string::npos) << error.what();
  }
}

TEST(NvmlProcessInfo, OwnPidsIncludeGetpid) {
  const auto pids = memscope::detail::own_pids();
  EXPECT_NE(std::find(pids.begin(), pids.end(), static_cast<std::uint32_t>(getpid())), pids.end());
}

}  // namespace
