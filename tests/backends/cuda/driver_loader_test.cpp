// The CUDA driver loader where no GPU is needed: a missing library, the toolkit's stub driver,
// the process-wide loader in a subprocess, and error text. These run on every machine.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

#include "backends/cuda/cuda_factory.hpp"
#include "backends/cuda/device_query.hpp"
#include "backends/cuda/driver_loader.hpp"
#include "memscope/backend.hpp"
#include "memscope/cuda_backend.hpp"
#include "memscope/errors.hpp"

namespace {

using memscope::detail::DriverStatus;
using memscope::detail::load_cuda_driver;
namespace cu = memscope::cu;

// A fresh empty directory, removed when the test ends.
class EmptyDir {
 public:
  EmptyDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "memscope-empty-XXXXXX").string();
    const char* made = mkdtemp(pattern.data());
    if (made != nullptr) path_ = made;
  }
  EmptyDir(const EmptyDir&) = delete;
  EmptyDir& operator=(const EmptyDir&) = delete;
  ~EmptyDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

TEST(CudaDriverLoader, MissingLibraryIsReportedAsNotFound) {
  const EmptyDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string path = (dir.path() / "libcuda.so.1").string();
  const auto load = load_cuda_driver(path);
  EXPECT_EQ(load.status, DriverStatus::not_found);
  EXPECT_EQ(load.driver, nullptr);
  EXPECT_NE(load.reason.find(path), std::string::npos) << load.reason;
  EXPECT_NE(load.reason.find("could not be loaded"), std::string::npos) << load.reason;
}

TEST(CudaDriverLoader, ToolkitStubDriverIsRefused) {
#ifndef MEMSCOPE_CUDA_STUB_LIBRARY
  GTEST_SKIP() << "no CUDA toolkit stub library (lib64/stubs/libcuda.so) was found at configure "
                  "time; set CUDA_HOME to a toolkit to run this test";
#else
  const std::string stub = MEMSCOPE_CUDA_STUB_LIBRARY;
  const auto load = load_cuda_driver(stub);
  EXPECT_EQ(load.status, DriverStatus::stub) << load.reason;
  EXPECT_EQ(load.driver, nullptr);
  EXPECT_NE(load.reason.find("stub"), std::string::npos) << load.reason;
  EXPECT_NE(load.reason.find("CUDA_ERROR_STUB_LIBRARY (34)"), std::string::npos) << load.reason;
  // The refused stub must not stay resident: it carries the driver's soname (libcuda.so.1) and
  // would shadow the real driver in a later dlopen.
  EXPECT_EQ(dlopen(stub.c_str(), RTLD_NOW | RTLD_NOLOAD), nullptr);
#endif
}

// Runs `check` in a re-executed copy of this test binary with MEMSCOPE_CUDA_DRIVER set, so the
// process-wide loader starts from nothing, as in a fresh program.
void expect_in_subprocess(const std::string& driver_path, void (*check)(),
                          const char* expected_stderr) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ASSERT_EQ(setenv("MEMSCOPE_CUDA_DRIVER", driver_path.c_str(), 1), 0);
  EXPECT_EXIT(check(), testing::ExitedWithCode(0), expected_stderr);
  unsetenv("MEMSCOPE_CUDA_DRIVER");
}

void check_unavailable_everywhere() {
  const memscope::Availability availability = memscope::cuda_available();
  std::cerr << "reason: " << availability.reason << "\n";
  if (availability.available || memscope::cuda_device_count() != 0 ||
      memscope::cuda_driver_version() != 0) {
    std::exit(1);
  }
  try {
    (void)memscope::make_backend("cuda:0");
    std::exit(2);
  } catch (const memscope::BackendUnavailableError& error) {
    std::cerr << "make_backend: " << error.what() << "\n";
  }
  try {
    (void)memscope::CudaBackend(0);
    std::exit(3);
  } catch (const memscope::BackendUnavailableError&) {
  }
  std::exit(0);
}

TEST(CudaDriverLoader, ProcessWithEmptyLibraryPathSaysNotFound) {
  const EmptyDir dir;
  ASSERT_FALSE(dir.path().empty());
  expect_in_subprocess((dir.path() / "libcuda.so.1").string(), check_unavailable_everywhere,
                       "make_backend: cuda:0: CUDA is unavailable: the CUDA driver library .* "
                       "could not be loaded");
}

TEST(CudaDriverLoader, ProcessGivenTheStubSaysStub) {
#ifndef MEMSCOPE_CUDA_STUB_LIBRARY
  GTEST_SKIP() << "no CUDA toolkit stub library was found at configure time";
#else
  expect_in_subprocess(MEMSCOPE_CUDA_STUB_LIBRARY, check_unavailable_everywhere,
                       "make_backend: cuda:0: CUDA is unavailable: .* stub driver");
#endif
}

TEST(CudaDriverLoader, AvailabilityAndFactoryAgree) {
  // Whatever this machine has: unavailable comes with a reason, and the factory then throws the
  // typed error carrying it; available means a backend can be built.
  const memscope::Availability availability = memscope::cuda_available();
  if (!availability.available) {
    EXPECT_FALSE(availability.reason.empty());
    EXPECT_EQ(memscope::cuda_device_count(), 0);
    try {
      (void)memscope::detail::make_cuda_backend(0);
      ADD_FAILURE() << "make_cuda_backend succeeded although CUDA is unavailable";
    } catch (const memscope::BackendUnavailableError& error) {
      EXPECT_NE(std::string(error.what()).find(availability.reason), std::string::npos)
          << error.what();
    }
  } else {
    EXPECT_GT(memscope::cuda_device_count(), 0);
    EXPECT_GT(memscope::cuda_driver_version(), 0);
    EXPECT_EQ(memscope::detail::make_cuda_backend(0)->name(), "cuda:0");
  }
}

TEST(CudaDriverLoader, DeviceIndexOutOfRangeIsUnavailable) {
  EXPECT_THROW((void)memscope::detail::make_cuda_backend(-1), memscope::BackendUnavailableError);
  EXPECT_THROW((void)memscope::detail::make_cuda_backend(1 << 20),
               memscope::BackendUnavailableError);
}

TEST(CudaDriverErrors, DescribedWithoutADriverFromTheBuiltInTable) {
  using memscope::detail::describe_cuda_error;
  EXPECT_EQ(describe_cuda_error(nullptr, cu::CUDA_ERROR_OUT_OF_MEMORY),
            "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory");
  EXPECT_EQ(describe_cuda_error(nullptr, cu::CUDA_ERROR_STUB_LIBRARY),
            "CUDA_ERROR_STUB_LIBRARY (34): CUDA driver is a stub library");
  EXPECT_EQ(describe_cuda_error(nullptr, static_cast<cu::CUresult>(12345)), "CUDA error (12345)");
}

TEST(CudaDriverErrors, UuidIsFormattedAsNvidiaSmiPrintsIt) {
  const unsigned char bytes[16] = {0x8e, 0x6f, 0x5a, 0x1c, 0x00, 0x01, 0xab, 0xcd,
                                   0xef, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0xff};
  EXPECT_EQ(memscope::detail::format_gpu_uuid(bytes), "GPU-8e6f5a1c-0001-abcd-ef10-2030405060ff");
}

}  // namespace
