// Shared helpers for tests that measure real memory: byte constants as doubles and a macro
// that prints sizes in MiB when a check fails.
#pragma once

#include <cstdint>

#include <gtest/gtest.h>

#include "memscope/units.hpp"

namespace memscope::testing {

inline double mib(std::int64_t bytes) {
  return static_cast<double>(bytes) / static_cast<double>(MiB);
}

// EXPECT that `bytes` is `expected_mib` MiB within `tolerance_mib` MiB.
#define EXPECT_MIB_NEAR(bytes, expected_mib, tolerance_mib) \
  EXPECT_NEAR(::memscope::testing::mib(bytes), (expected_mib), (tolerance_mib))

}  // namespace memscope::testing
