// MEMSCOPE_ALLOC_CONF: every option, every malformed form, and the round trip through
// to_string().
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdlib>
#include <limits>
#include <string>

#include "memscope/config.hpp"
#include "memscope/errors.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

TEST(Config, EmptyMeansDefaults) {
  EXPECT_EQ(AllocatorConfig::parse(""), AllocatorConfig{});
  EXPECT_EQ(AllocatorConfig::parse("   "), AllocatorConfig{});
  EXPECT_EQ(AllocatorConfig{}.to_string(), "");
}

TEST(Config, MaxSplitSizeInBothSpellings) {
  EXPECT_EQ(AllocatorConfig::parse("max_split_size:256MiB").max_split_size, 256 * MiB);
  EXPECT_EQ(AllocatorConfig::parse("max_split_size_mb:256").max_split_size, 256 * MiB);
  EXPECT_EQ(AllocatorConfig::parse(" max_split_size : 1GiB ").max_split_size, 1 * GiB);
}

TEST(Config, RoundupDivisionsSingleAndList) {
  const auto single = AllocatorConfig::parse("roundup_power2_divisions:4");
  for (const auto d : single.roundup_power2_divisions) EXPECT_EQ(d, 4U);
  const auto list = AllocatorConfig::parse("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]");
  EXPECT_EQ(list.divisions_for(1 * MiB), 0U);  // 1 ("off") is stored as 0, its one spelling
  EXPECT_EQ(list.divisions_for(255 * MiB), 0U);
  EXPECT_EQ(list.divisions_for(256 * MiB), 2U);
  EXPECT_EQ(list.divisions_for(600 * MiB), 4U);
  EXPECT_EQ(list.divisions_for(1 * GiB), 8U);
  EXPECT_EQ(list.divisions_for(100 * GiB), 8U);
  // Found by fuzz_config: "1" (off) came back from to_string() as nothing, an unequal config.
  for (const char* off : {"roundup_power2_divisions:1", "roundup_power2_divisions:[256:1,>:1]"}) {
    const auto config = AllocatorConfig::parse(off);
    EXPECT_EQ(AllocatorConfig::parse(config.to_string()), config) << off;
    EXPECT_EQ(config, AllocatorConfig{}) << off;
  }
}

TEST(Config, GcThresholdAndMemoryLimit) {
  EXPECT_DOUBLE_EQ(
      AllocatorConfig::parse("garbage_collection_threshold:0.6").garbage_collection_threshold, 0.6);
  const auto fraction = AllocatorConfig::parse("memory_limit:0.5");
  EXPECT_EQ(fraction.memory_limit(8 * GiB), 4 * GiB);
  const auto bytes = AllocatorConfig::parse("memory_limit:3GiB");
  EXPECT_EQ(bytes.memory_limit(8 * GiB), 3 * GiB);
  EXPECT_EQ(AllocatorConfig{}.memory_limit(8 * GiB), 8 * GiB);
}

// Sizes of 2^63 bytes and more: exact, or a ConfigError naming the key and the value (they used
// to become exactly 2^63 on the way through a double).
TEST(Config, HugeSizesAreExactOrRejected) {
  const auto limit = AllocatorConfig::parse("memory_limit:16777215.99TiB");
  EXPECT_EQ(limit.memory_limit_bytes,
            18'446'744'062'714'435'338U);  // 16777215 TiB + round(0.99 TiB)
  EXPECT_EQ(limit.memory_limit(8 * GiB), 18'446'744'062'714'435'338U);
  EXPECT_EQ(AllocatorConfig::parse(limit.to_string()), limit) << limit.to_string();
  EXPECT_EQ(AllocatorConfig::parse("memory_limit:10000000000.5GB").memory_limit_bytes,
            10'000'000'000'500'000'000U);
  EXPECT_EQ(AllocatorConfig::parse("max_split_size:8388607TiB").max_split_size,
            (std::size_t{1} << 63) - (std::size_t{1} << 40));
  for (const char* text : {"memory_limit:16777216TiB", "memory_limit:16777215.9999999999999TiB",
                           "max_split_size:8388608TiB", "max_split_size:16777215.99TiB"}) {
    const std::string_view key = std::string_view(text).substr(0, std::string_view(text).find(':'));
    const std::string_view value = std::string_view(text).substr(key.size() + 1);
    try {
      const auto config = AllocatorConfig::parse(text);
      ADD_FAILURE() << text << " accepted as " << config.to_string();
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), key) << e.what();
      EXPECT_EQ(e.value(), value) << e.what();
      EXPECT_NE(std::string(e.what()).find(value), std::string::npos) << e.what();
    }
  }
}

TEST(Config, ExpandableSegmentsKeys) {
  const auto on = AllocatorConfig::parse(
      "expandable_segments:True,expandable_segments_page_size:8MiB,"
      "expandable_segments_recycling:always");
  EXPECT_TRUE(on.expandable_segments);
  EXPECT_EQ(on.expandable_segments_page_size, std::size_t{8} << 20);
  EXPECT_EQ(on.page_recycling, AllocatorConfig::PageRecycling::always);
  EXPECT_EQ(on.to_string(),
            "expandable_segments:true,expandable_segments_page_size:8MiB,"
            "expandable_segments_recycling:always");
  const auto defaults = AllocatorConfig::parse("expandable_segments:true");
  EXPECT_EQ(defaults.page_recycling, AllocatorConfig::PageRecycling::at_limit);
  EXPECT_EQ(
      AllocatorConfig::parse("expandable_segments:true,expandable_segments_recycling:at_limit")
          .page_recycling,
      AllocatorConfig::PageRecycling::at_limit);
  EXPECT_EQ(defaults.expandable_segments_page_size, 0U);
  EXPECT_EQ(AllocatorConfig::parse("expandable_segments:False"), AllocatorConfig{});
}

TEST(Config, RoundTripsThroughToString) {
  for (const char* text :
       {"max_split_size:256MiB", "roundup_power2_divisions:4",
        "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", "garbage_collection_threshold:0.75",
        "memory_limit:0.5", "memory_limit:3GiB",
        "max_split_size:1GiB,roundup_power2_divisions:2,garbage_collection_threshold:0.5,memory_"
        "limit:12GiB",
        "expandable_segments:True", "expandable_segments:false",
        "expandable_segments:true,expandable_segments_page_size:32MiB",
        "expandable_segments:true,expandable_segments_recycling:never",
        "expandable_segments:true,expandable_segments_recycling:always,max_split_size:64MiB"}) {
    const auto config = AllocatorConfig::parse(text);
    EXPECT_EQ(AllocatorConfig::parse(config.to_string()), config)
        << text << " -> " << config.to_string();
  }
}

struct Bad {
  const char* text;
  const char* key;       // the key the error must name
  const char* mentions;  // and a word of what is allowed
};

class ConfigRejects : public ::testing::TestWithParam<Bad> {};

TEST_P(ConfigRejects, WithTypedErrorNamingKeyAndValue) {
  const Bad bad = GetParam();
  try {
    (void)AllocatorConfig::parse(bad.text);
    FAIL() << "accepted: " << bad.text;
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), bad.key) << e.what();
    EXPECT_NE(std::string(e.what()).find(bad.mentions), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, ConfigRejects,
    ::testing::Values(
        Bad{"max_split:10", "max_split", "known keys"},
        Bad{"MAX_SPLIT_SIZE:256MiB", "MAX_SPLIT_SIZE", "known keys"},
        Bad{"max_split_size", "max_split_size", "key:value"},
        Bad{"max_split_size:", "max_split_size", "at least 20"},
        Bad{"max_split_size:10MiB", "max_split_size", "at least 20 MiB"},
        Bad{"max_split_size:lots", "max_split_size", "256MiB"},
        Bad{"max_split_size_mb:1.5", "max_split_size_mb", "whole number"},
        Bad{"max_split_size_mb:-5", "max_split_size_mb", "whole number"},
        Bad{"max_split_size_mb:99999999999999999999", "max_split_size_mb", "whole number"},
        Bad{"max_split_size:256MiB,max_split_size_mb:300", "max_split_size_mb", "once"},
        Bad{"roundup_power2_divisions:3", "roundup_power2_divisions", "power of two"},
        Bad{"roundup_power2_divisions:2048", "roundup_power2_divisions", "power of two"},
        Bad{"roundup_power2_divisions:[256:1", "roundup_power2_divisions", "list"},
        Bad{"roundup_power2_divisions:[300:1]", "roundup_power2_divisions", "list"},
        Bad{"roundup_power2_divisions:[512:1,256:2]", "roundup_power2_divisions", "rising"},
        Bad{"roundup_power2_divisions:[>:2,>:4]", "roundup_power2_divisions", "list"},
        Bad{"roundup_power2_divisions:[256]", "roundup_power2_divisions", "list"},
        Bad{"garbage_collection_threshold:1.0", "garbage_collection_threshold", "between 0 and 1"},
        Bad{"garbage_collection_threshold:0", "garbage_collection_threshold", "between 0 and 1"},
        Bad{"garbage_collection_threshold:nan", "garbage_collection_threshold", "between 0 and 1"},
        Bad{"memory_limit:1.5", "memory_limit", "fraction"},
        Bad{"memory_limit:0", "memory_limit", "fraction"},
        Bad{"memory_limit:0GiB", "memory_limit", "fraction"},
        Bad{"memory_limit:12 bananas", "memory_limit", "size"},
        Bad{"expandable_segments:maybe", "expandable_segments", "true or false"},
        Bad{"expandable_segments_page_size:3MiB,expandable_segments:true",
            "expandable_segments_page_size", "power of two"},
        Bad{"expandable_segments_recycling:sometimes,expandable_segments:true",
            "expandable_segments_recycling", "never, at_limit, above_peak or always"},
        Bad{"expandable_segments_page_size:4MiB", "expandable_segments_page_size",
            "add expandable_segments:true"},
        Bad{"backend:cudaMallocAsync", "backend", "not supported"}));

TEST(Config, EmptyEntryIsAnError) {
  EXPECT_THROW((void)AllocatorConfig::parse("max_split_size:256MiB,,memory_limit:0.5"),
               ConfigError);
  EXPECT_THROW((void)AllocatorConfig::parse("memory_limit:0.5,"), ConfigError);
}

TEST(Config, FractionToLimitIsOneRule) {
  EXPECT_EQ(memory_limit_from_fraction(0.5, 8 * GiB), 4 * GiB);
  EXPECT_EQ(memory_limit_from_fraction(1.0, 8 * GiB), 8 * GiB);
  EXPECT_EQ(memory_limit_from_fraction(0.25, 1001), 250U);  // rounded down, as torch does
  // memory_limit:<fraction> and the function agree, for any capacity.
  for (const double fraction : {0.1, 0.3, 0.75, 0.9999}) {
    const AllocatorConfig config = AllocatorConfig::parse(fmt::format("memory_limit:{}", fraction));
    for (const std::size_t capacity : {std::size_t{1000}, 24 * GiB, std::size_t{80'000'000'000}}) {
      EXPECT_EQ(config.memory_limit(capacity), memory_limit_from_fraction(fraction, capacity));
    }
  }
}

TEST(Config, FractionOutsideZeroToOneIsAnErrorNamingIt) {
  for (const double fraction : {0.0, -0.5, 1.5, std::numeric_limits<double>::quiet_NaN(),
                                std::numeric_limits<double>::infinity()}) {
    try {
      (void)memory_limit_from_fraction(fraction, 8 * GiB);
      ADD_FAILURE() << "accepted " << fraction;
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), "memory_fraction");
      EXPECT_EQ(e.value(), fmt::format("{}", fraction));
      EXPECT_NE(
          std::string(e.what()).find(fmt::format("memory fraction {} is not in (0, 1]", fraction)),
          std::string::npos)
          << e.what();
    }
  }
}

TEST(Config, FromEnvironment) {
  ASSERT_EQ(setenv("MEMSCOPE_ALLOC_CONF", "memory_limit:0.5", 1),
            0);  // NOLINT(concurrency-mt-unsafe)
  EXPECT_DOUBLE_EQ(AllocatorConfig::from_env().memory_fraction, 0.5);
  ASSERT_EQ(setenv("MEMSCOPE_ALLOC_CONF", "bogus:1", 1), 0);  // NOLINT(concurrency-mt-unsafe)
  EXPECT_THROW((void)AllocatorConfig::from_env(), ConfigError);
  ASSERT_EQ(unsetenv("MEMSCOPE_ALLOC_CONF"), 0);  // NOLINT(concurrency-mt-unsafe)
  EXPECT_EQ(AllocatorConfig::from_env(), AllocatorConfig{});
}

}  // namespace
}  // namespace memscope
