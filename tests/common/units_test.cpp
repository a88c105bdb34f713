#include <gtest/gtest.h>

#include "memscope/errors.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

TEST(Units, ParsesBinaryAndDecimalUnits) {
  EXPECT_EQ(parse_size("512"), 512U);
  EXPECT_EQ(parse_size("512B"), 512U);
  EXPECT_EQ(parse_size("4KiB"), 4096U);
  EXPECT_EQ(parse_size("24GiB"), 24 * GiB);
  EXPECT_EQ(parse_size("24 gib"), 24 * GiB);
  EXPECT_EQ(parse_size("1.5GiB"), 1536 * MiB);
  EXPECT_EQ(parse_size("2GB"), 2'000'000'000U);
  EXPECT_EQ(parse_size("1TiB"), 1024 * GiB);
  EXPECT_EQ(parse_size(" 3 MB "), 3'000'000U);
}

TEST(Units, RejectsWhatIsNotASize) {
  for (const char* bad : {"", "GiB", "-1", "1.5", "12 bananas", "1e9", "0x10",
                          "99999999999999999999", "20000000TiB", "1..5GiB"}) {
    EXPECT_THROW((void)parse_size(bad, "capacity"), ConfigError) << bad;
  }
  try {
    (void)parse_size("12 bananas", "capacity");
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "capacity");
    EXPECT_EQ(e.value(), "12 bananas");
    EXPECT_NE(std::string(e.what()).find("unknown unit 'bananas'"), std::string::npos);
  }
}

TEST(Units, FormatsHonestBinaryUnits) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(static_cast<std::int64_t>(1536 * MiB)), "1.50 GiB");
  EXPECT_EQ(format_bytes(-static_cast<std::int64_t>(3 * MiB)), "-3.00 MiB");
  EXPECT_EQ(format_size_exact(24 * GiB), "24GiB");
  EXPECT_EQ(format_size_exact(1536 * MiB), "1536MiB");
  EXPECT_EQ(format_size_exact(1000), "1000B");
  for (const std::size_t n : {std::size_t{1}, 4096UL, 24 * GiB, 1536 * MiB, 12345UL}) {
    EXPECT_EQ(parse_size(format_size_exact(n)), n);
  }
}

}  // namespace
}  // namespace memscope
