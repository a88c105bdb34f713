// BackendSpec: the one parser of "host", "sim:<size>", "cuda" and "cuda:<index>".
#include <gtest/gtest.h>

#include <string>

#include "memscope/backend.hpp"
#include "memscope/errors.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

using Type = BackendSpec::Type;

TEST(BackendSpec, ParsesEveryForm) {
  EXPECT_EQ(BackendSpec::parse("host"), (BackendSpec{.type = Type::host}));
  EXPECT_EQ(BackendSpec::parse("sim:24GiB"),
            (BackendSpec{.type = Type::simulated, .capacity = 24 * GiB}));
  EXPECT_EQ(BackendSpec::parse("sim:1.5 GB"),
            (BackendSpec{.type = Type::simulated, .capacity = 1'500'000'000}));
  EXPECT_EQ(BackendSpec::parse("cuda"), (BackendSpec{.type = Type::cuda, .device_index = 0}));
  EXPECT_EQ(BackendSpec::parse("cuda:3"), (BackendSpec{.type = Type::cuda, .device_index = 3}));
}

TEST(BackendSpec, CanonicalSpellingParsesBackToTheSameSpec) {
  for (const char* text : {"host", "sim:24GiB", "sim:24 gib", "sim:1536MiB", "sim:1000B", "cuda",
                           "cuda:0", "cuda:7"}) {
    const BackendSpec spec = BackendSpec::parse(text);
    EXPECT_EQ(BackendSpec::parse(spec.to_string()), spec) << text;
  }
  EXPECT_EQ(BackendSpec::parse("sim:24 gib").to_string(), "sim:24GiB");
  EXPECT_EQ(BackendSpec::parse("sim:1024MiB").to_string(), "sim:1GiB");
  EXPECT_EQ(BackendSpec::parse("cuda").to_string(), "cuda:0");
}

TEST(BackendSpec, CanonicalSpellingIsTheBackendsName) {
  for (const char* text : {"host", "sim:24 GiB", "sim:1536MiB", "sim:1GB", "sim:4096B"}) {
    const BackendSpec spec = BackendSpec::parse(text);
    EXPECT_EQ(make_backend(spec)->name(), spec.to_string()) << text;
    EXPECT_EQ(make_backend(text)->name(), spec.to_string()) << text;
  }
}

TEST(BackendSpec, RejectsBadSpecsNamingThem) {
  // "sim:24" is 24 GiB meant, not 24 bytes: a size needs its unit.
  for (const char* text : {"", "Host", "gpu", "sim", "sim:", "sim:0", "sim:24", "sim:lots",
                           "cuda:", "cuda:x", "cuda:-1", "cuda:1.5", "cuda: 1", "cuda:+1"}) {
    try {
      (void)BackendSpec::parse(text);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), "backend");
      EXPECT_EQ(e.value(), text);
      EXPECT_NE(std::string(e.what()).find("sim:<size>"), std::string::npos) << e.what();
    }
  }
}

TEST(BackendSpec, MakeBackendChecksSpecsBuiltInCode) {
  EXPECT_THROW((void)make_backend(BackendSpec{.type = Type::simulated, .capacity = 0}),
               ConfigError);
  EXPECT_THROW((void)make_backend(BackendSpec{.type = Type::cuda, .device_index = -2}),
               ConfigError);
}

}  // namespace
}  // namespace memscope
