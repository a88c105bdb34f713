#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

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

// Sizes people type: "--capacity 24" means 24 GiB far more often than 24 bytes.
TEST(Units, ASizeWithUnitRefusesABareNumber) {
  EXPECT_EQ(parse_size_with_unit("24GiB", "--capacity"), 24 * GiB);
  EXPECT_EQ(parse_size_with_unit(" 512 B ", "--capacity"), 512U);
  for (const char* bare : {"24", "1.5", " 24 ", "0"}) {
    try {
      (void)parse_size_with_unit(bare, "--capacity");
      ADD_FAILURE() << bare << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), "--capacity");
      EXPECT_NE(std::string(e.what()).find("has no unit"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("B for bytes"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW((void)parse_size_with_unit("lots", "x"), ConfigError);  // parse_size()'s errors
  EXPECT_EQ(format_count(3442), "3,442");
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

// Sizes of 2^63 bytes and more: exact, or a ConfigError naming the text (they used to go
// through a double and llround, and came back as exactly 2^63).
TEST(Units, SizesOfTwoToTheSixtyThreeAndMoreAreExact) {
  EXPECT_EQ(parse_size("10000000000.5GB"), 10'000'000'000'500'000'000U);
  EXPECT_EQ(parse_size("16777215.99TiB"), 18'446'744'062'714'435'338U);  // round(0.99 * 2^40)
  EXPECT_EQ(parse_size("8388608TiB"), std::size_t{1} << 63);
  EXPECT_EQ(parse_size("8388607.5TiB"), (std::size_t{1} << 63) - (std::size_t{1} << 39));
  EXPECT_EQ(parse_size("18446744073709551615"), 18'446'744'073'709'551'615U);
  EXPECT_EQ(parse_size("18446744073.709551615GB"), 18'446'744'073'709'551'615U);
  EXPECT_EQ(parse_size("16777215.999999999999TiB"),
            18'446'744'073'709'551'615U);  // rounds to 2^64 - 1
  // Halves round up, exactly, however many digits follow.
  EXPECT_EQ(parse_size("0.0005KB"), 1U);
  EXPECT_EQ(parse_size("0.00049999999999999999999999KB"), 0U);
  EXPECT_EQ(parse_size("1.00000000000000000000000000001TiB"), 1024 * GiB);
  EXPECT_EQ(parse_size("2.000B"), 2U);
  EXPECT_THROW((void)parse_size("2.50B"), ConfigError);  // not a whole number of bytes
  for (const char* bad : {"16777216TiB", "16777215.9999999999999TiB", "18446744073709551616",
                          "18446744073.7095516155GB", "18446744073.709551616GB"}) {
    try {
      const std::size_t got = parse_size(bad, "memory_limit");
      ADD_FAILURE() << bad << " gave " << got;
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.value(), bad);
      EXPECT_NE(std::string(e.what()).find("too large for 64 bits"), std::string::npos) << e.what();
    }
  }
}

TEST(Units, FormatsSizesOfTwoToTheSixtyThreeAndMoreAsPositive) {
  EXPECT_EQ(format_size(std::size_t{1} << 63), "8.00 EiB");
  EXPECT_EQ(format_size(~std::size_t{0}), "16.00 EiB");
  EXPECT_EQ(format_size(1536), "1.50 KiB");
  EXPECT_EQ(format_size(1023), "1023 B");
  EXPECT_EQ(format_bytes(std::numeric_limits<std::int64_t>::min()), "-8.00 EiB");
  EXPECT_EQ(format_bytes(std::numeric_limits<std::int64_t>::max()), "8.00 EiB");
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
