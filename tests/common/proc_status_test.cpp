#include "common/proc_status.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace memscope::detail {
namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;

Fields all_fields(std::string_view text) {
  Fields out;
  for_each_status_field(text, [&out](std::string_view key, std::string_view value) {
    out.emplace_back(key, value);
    return false;
  });
  return out;
}

TEST(ProcStatus, SplitsLinesIntoKeysAndValues) {
  const Fields fields = all_fields("Name:\tcat\nVmHWM:\t 3145728 kB\nno colon here\nNSpid:\t42\t7");
  const Fields expected{{"Name", "cat"}, {"VmHWM", "3145728 kB"}, {"NSpid", "42\t7"}};
  EXPECT_EQ(fields, expected);
}

TEST(ProcStatus, EmptyValuesAndTextWithoutFields) {
  EXPECT_TRUE(all_fields("").empty());
  EXPECT_TRUE(all_fields("\n\n").empty());
  const Fields expected{{"VmRSS", ""}};
  EXPECT_EQ(all_fields("VmRSS:\t \n"), expected);
}

TEST(ProcStatus, VisitStopsWhenItReturnsTrue) {
  int calls = 0;
  for_each_status_field("A:1\nB:2\nC:3\n", [&calls](std::string_view key, std::string_view) {
    ++calls;
    return key == "B";
  });
  EXPECT_EQ(calls, 2);
}

TEST(ProcStatus, TakeNumberConsumesBlanksAndDigits) {
  std::string_view text = " \t12 34x";
  EXPECT_EQ(take_number(text), 12);
  EXPECT_EQ(text, " 34x");
  EXPECT_EQ(take_number(text), 34);
  EXPECT_EQ(text, "x");
  EXPECT_EQ(take_number(text), std::nullopt);
  EXPECT_EQ(text, "x");  // unchanged when nothing was read
}

TEST(ProcStatus, TakeNumberRefusesWhatDoesNotFit) {
  std::string_view too_big = "99999999999999999999";
  EXPECT_EQ(take_number(too_big), std::nullopt);
  std::string_view largest = "9223372036854775807";
  EXPECT_EQ(take_number(largest), INT64_MAX);
  std::string_view negative = "-1";
  EXPECT_EQ(take_number(negative), std::nullopt);
}

TEST(ProcStatus, KibValuesInBytes) {
  EXPECT_EQ(status_kib_as_bytes("3145728 kB"), 3145728LL * 1024);
  EXPECT_EQ(status_kib_as_bytes("0 kB"), 0);
  EXPECT_EQ(status_kib_as_bytes("kB"), std::nullopt);
  EXPECT_EQ(status_kib_as_bytes(""), std::nullopt);
}

TEST(ProcStatus, SelfNamespacePidsEndWithOurOwnPid) {
  const std::vector<std::uint32_t> pids = self_namespace_pids();
  if (pids.empty()) GTEST_SKIP() << "this kernel has no NSpid line (before Linux 4.1)";
  // NSpid lists the id in the outermost namespace first, and the one we see last.
  EXPECT_EQ(pids.back(), static_cast<std::uint32_t>(getpid()));
}

}  // namespace
}  // namespace memscope::detail
