#include "common/errno_text.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <thread>
#include <vector>

namespace memscope::detail {
namespace {

TEST(ErrnoText, NamesTheError) {
  EXPECT_EQ(errno_text(ENOENT), "No such file or directory");
  EXPECT_EQ(errno_text(EACCES), "Permission denied");
}

TEST(ErrnoText, UnknownNumbersStillGiveText) {
  EXPECT_FALSE(errno_text(123456).empty());
}

TEST(ErrnoText, IsThreadSafe) {
  std::vector<std::thread> threads;
  std::vector<std::string> seen(8);
  for (std::size_t t = 0; t < seen.size(); ++t) {
    threads.emplace_back([&seen, t] {
      const int error = t % 2 == 0 ? ENOENT : EACCES;
      for (int i = 0; i < 1000; ++i) seen[t] = errno_text(error);
    });
  }
  for (std::thread& t : threads) t.join();
  for (std::size_t t = 0; t < seen.size(); ++t) {
    EXPECT_EQ(seen[t], t % 2 == 0 ? "No such file or directory" : "Permission denied");
  }
}

}  // namespace
}  // namespace memscope::detail
