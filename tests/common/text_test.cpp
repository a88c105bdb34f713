#include "common/text.hpp"

#include <gtest/gtest.h>

namespace memscope::detail {
namespace {

TEST(Text, TrimRemovesWhitespaceAtBothEndsOnly) {
  EXPECT_EQ(trim("  a b \t\n"), "a b");
  EXPECT_EQ(trim("a"), "a");
  EXPECT_EQ(trim(""), "");
  EXPECT_EQ(trim(" \t\r\n\v\f"), "");
  EXPECT_EQ(trim("x  "), "x");
  EXPECT_EQ(trim("  x"), "x");
}

TEST(Text, TrimReturnsAViewIntoItsArgument) {
  constexpr std::string_view text = "  key ";
  const std::string_view trimmed = trim(text);
  EXPECT_EQ(trimmed.data(), text.data() + 2);
}

TEST(Text, TrimTreatsBytesAboveAsciiAsText) {
  // std::isspace of a negative char is undefined; trim must cast first.
  EXPECT_EQ(trim("\xa0x\xa0"), "\xa0x\xa0");
}

TEST(Text, IequalsLowerIgnoresTheCaseOfTheText) {
  EXPECT_TRUE(iequals_lower("GiB", "gib"));
  EXPECT_TRUE(iequals_lower("gib", "gib"));
  EXPECT_TRUE(iequals_lower("", ""));
  EXPECT_FALSE(iequals_lower("GiB", "gi"));
  EXPECT_FALSE(iequals_lower("MiB", "gib"));
}

}  // namespace
}  // namespace memscope::detail
