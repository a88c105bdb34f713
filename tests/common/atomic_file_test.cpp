// write_file_atomically over what is not a plain file (issue 29.4): /dev/null, a FIFO, a link
// to a file, a 0600 file. Before, every one was replaced by a new 0644 regular file.
#include "common/atomic_file.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "memscope/errors.hpp"

namespace memscope::detail {
namespace {

namespace fs = std::filesystem;

class AtomicFile : public ::testing::Test {
 protected:
  void SetUp() override {
    folder = fs::temp_directory_path() /
             ("memscope_atomic_" + std::to_string(::getpid()) + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(folder);
    fs::create_directories(folder);
  }
  void TearDown() override { fs::remove_all(folder); }

  static std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }

  fs::path folder;
};

TEST_F(AtomicFile, ACharacterDeviceStaysOne) {
  // A node of its own with /dev/null's numbers (1, 3), so that a regression replaces this one
  // and not the machine's /dev/null.
  const fs::path node = folder / "null";
  if (::mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
    GTEST_SKIP() << "mknod needs CAP_MKNOD";
  }
  struct stat before {};
  ASSERT_EQ(::stat(node.c_str(), &before), 0);
  write_file_atomically(node, "not a file\n");
  struct stat after {};
  ASSERT_EQ(::stat(node.c_str(), &after), 0);
  EXPECT_TRUE(S_ISCHR(after.st_mode));
  EXPECT_EQ(after.st_ino, before.st_ino);
}

TEST_F(AtomicFile, AFifoIsWrittenInto) {
  const fs::path fifo = folder / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // The reader opens without blocking and waits at most 10 s, so a regression (the FIFO
  // replaced by a file, nothing ever written into it) fails instead of hanging.
  const int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(fd, 0);
  std::string got;
  std::thread reader([&] {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10'000) <= 0) return;
    ::fcntl(fd, F_SETFL, 0);
    char chunk[256];
    for (ssize_t n = 0; (n = ::read(fd, chunk, sizeof chunk)) > 0;) {
      got.append(chunk, static_cast<std::size_t>(n));
    }
  });
  write_file_atomically(fifo, "through the pipe");
  reader.join();
  ::close(fd);
  EXPECT_EQ(got, "through the pipe");
  EXPECT_TRUE(fs::is_fifo(fifo));
}

TEST_F(AtomicFile, ALinkKeepsPointingAtTheReplacedFile) {
  const fs::path file = folder / "real.json";
  const fs::path link = folder / "link.json";
  write_file_atomically(file, "old");
  fs::create_symlink(file, link);
  write_file_atomically(link, "new");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(read(file), "new");
}

TEST_F(AtomicFile, AReplacedFileKeepsItsMode) {
  const fs::path file = folder / "private.json";
  write_file_atomically(file, "old");
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write);
  write_file_atomically(file, "new");
  EXPECT_EQ(read(file), "new");
  EXPECT_EQ(fs::status(file).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
}

TEST_F(AtomicFile, AFolderIsRefused) {
  EXPECT_THROW(write_file_atomically(folder, "x"), BackendError);
  EXPECT_TRUE(fs::is_directory(folder));
}

}  // namespace
}  // namespace memscope::detail
