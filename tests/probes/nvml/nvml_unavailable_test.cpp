// NVML where it cannot be used: a missing library gives "unavailable" with the reason, and
// device_memory_info() then falls back to CUDA or says why neither works. Runs everywhere.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

#include "memscope/device_probe.hpp"
#include "memscope/errors.hpp"
#include "probes/nvml/nvml_loader.hpp"

namespace {

std::filesystem::path make_empty_dir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "memscope-nvml-XXXXXX").string();
  const char* made = mkdtemp(pattern.data());
  return made != nullptr ? std::filesystem::path(made) : std::filesystem::path();
}

TEST(NvmlUnavailable, MissingLibraryIsReportedWithItsPath) {
  const auto dir = make_empty_dir();
  ASSERT_FALSE(dir.empty());
  const std::string path = (dir / "libnvidia-ml.so.1").string();
  const auto load = memscope::detail::load_nvml(path);
  EXPECT_FALSE(load.loaded);
  EXPECT_EQ(load.library, nullptr);
  EXPECT_NE(load.reason.find(path), std::string::npos) << load.reason;
  std::filesystem::remove_all(dir);
}

// In a fresh process with neither NVML nor the CUDA driver to be found.
void check_nothing_available() {
  const memscope::Availability nvml = memscope::NvmlProbe::available();
  std::cerr << "nvml: " << nvml.reason << "\n";
  if (nvml.available || nvml.reason.empty()) std::exit(1);
  try {
    const memscope::NvmlProbe probe;
    std::exit(2);
  } catch (const memscope::BackendUnavailableError& error) {
    std::cerr << "probe: " << error.what() << "\n";
  }
  try {
    (void)memscope::device_memory_info(0);
    std::exit(3);
  } catch (const memscope::BackendUnavailableError& error) {
    std::cerr << "device_memory_info: " << error.what() << "\n";
  }
  std::exit(0);
}

TEST(NvmlUnavailable, ProcessWithoutNvmlOrDriverSaysWhy) {
  const auto dir = make_empty_dir();
  ASSERT_FALSE(dir.empty());
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  setenv("MEMSCOPE_NVML_LIBRARY", (dir / "libnvidia-ml.so.1").c_str(), 1);
  setenv("MEMSCOPE_CUDA_DRIVER", (dir / "libcuda.so.1").c_str(), 1);
  EXPECT_EXIT(check_nothing_available(), testing::ExitedWithCode(0),
              "probe: NVML is unavailable: NVML .* could not be loaded.*\n"
              "device_memory_info: cuda:0: no device memory figures: NVML: .*; CUDA: .*"
              "could not be loaded");
  unsetenv("MEMSCOPE_NVML_LIBRARY");
  unsetenv("MEMSCOPE_CUDA_DRIVER");
  std::filesystem::remove_all(dir);
}

TEST(NvmlUnavailable, AvailabilityAndProbeAgreeOnThisMachine) {
  const memscope::Availability nvml = memscope::NvmlProbe::available();
  if (nvml.available) {
    EXPECT_NO_THROW({ const memscope::NvmlProbe probe; });
  } else {
    EXPECT_FALSE(nvml.reason.empty());
    EXPECT_THROW({ const memscope::NvmlProbe probe; }, memscope::BackendUnavailableError);
  }
}

}  // namespace
