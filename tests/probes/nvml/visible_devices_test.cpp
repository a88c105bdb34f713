// CUDA_VISIBLE_DEVICES to NVML indices, following the CUDA driver's rules.
#include "probes/nvml/visible_devices.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace {

using memscope::detail::resolve_visible_devices;

const std::vector<std::string> kUuids = {
    "GPU-8e6f5a1c-0001-abcd-ef10-2030405060ff",
    "GPU-11223344-5566-7788-99aa-bbccddeeff00",
    "GPU-8e6f0000-0000-0000-0000-000000000000",
    "GPU-deadbeef-0000-0000-0000-000000000001",
};

std::vector<std::optional<unsigned>> physical(std::optional<std::string_view> visible) {
  std::vector<std::optional<unsigned>> out;
  for (const auto& d : resolve_visible_devices(visible, kUuids)) out.push_back(d.physical);
  return out;
}

using P = std::vector<std::optional<unsigned>>;

TEST(VisibleDevices, UnsetShowsEveryDeviceInOrder) {
  EXPECT_EQ(physical(std::nullopt), (P{0U, 1U, 2U, 3U}));
}

TEST(VisibleDevices, EmptyHidesEverything) {
  EXPECT_TRUE(physical("").empty());
  EXPECT_TRUE(physical("-1").empty());
}

TEST(VisibleDevices, IndicesReorderAndSelect) {
  EXPECT_EQ(physical("2,0"), (P{2U, 0U}));
  EXPECT_EQ(physical(" 3 , 1 "), (P{3U, 1U}));
}

TEST(VisibleDevices, FirstInvalidEntryHidesTheRest) {
  EXPECT_EQ(physical("1,7,0"), (P{1U}));        // 7 does not exist
  EXPECT_EQ(physical("1,-1,0"), (P{1U}));       // the usual way to hide devices
  EXPECT_EQ(physical("0,1,0,2"), (P{0U, 1U}));  // a repeat is invalid
  EXPECT_EQ(physical("0,,1"), (P{0U}));
  EXPECT_EQ(physical("0,banana,1"), (P{0U}));
}

TEST(VisibleDevices, UuidsWithOrWithoutPrefixAndUniquePrefixes) {
  EXPECT_EQ(physical("GPU-11223344-5566-7788-99aa-bbccddeeff00"), (P{1U}));
  EXPECT_EQ(physical("gpu-DEADBEEF"), (P{3U}));     // case-insensitive prefix
  EXPECT_EQ(physical("11223344-5566"), (P{1U}));    // no "GPU-" prefix
  EXPECT_EQ(physical("GPU-8e6f5,2"), (P{0U, 2U}));  // unique prefixes
  EXPECT_EQ(physical("3,GPU-8e6f,0"), (P{3U}));     // ambiguous: 0 and 2 match
  EXPECT_EQ(physical("GPU-ffffffff,0"), P{});       // unknown
}

TEST(VisibleDevices, MigInstancesKeepTheirPlaceWithoutAnNvmlIndex) {
  const auto devices =
      resolve_visible_devices("MIG-4c9d1b1a-3b4e-5f6a-8b9c-0d1e2f3a4b5c,1", kUuids);
  ASSERT_EQ(devices.size(), 2U);
  EXPECT_EQ(devices[0].physical, std::nullopt);
  EXPECT_EQ(devices[0].entry, "MIG-4c9d1b1a-3b4e-5f6a-8b9c-0d1e2f3a4b5c");
  EXPECT_EQ(devices[1].physical, 1U);
  EXPECT_EQ(physical("MIG-GPU-8e6f5a1c-0001-abcd-ef10-2030405060ff/1/0"), (P{std::nullopt}));
}

}  // namespace
