// read_whole_file() (memscope/trace.hpp): every file memscope reads as input, read once, with a
// cap, saying what the path is when it is not a file with bytes to read.
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdint>
#include <string>

#include "common/errno_text.hpp"
#include "memscope/errors.hpp"
#include "memscope/trace.hpp"

namespace memscope {
namespace {

using detail::errno_text;

// A FIFO nobody opens for writing would block the reader forever: wait this long for a writer.
constexpr int kFifoWaitMs = 5000;

// A stream (pipe, FIFO, terminal, /proc file) has no size to trust: read at most this much, so
// `cat /dev/zero |` is an error, not the machine's memory. Half the machine, at most 64 GiB.
std::uint64_t stream_cap() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  constexpr std::uint64_t kMax = std::uint64_t{64} << 30;
  if (pages <= 0 || page <= 0) return kMax;
  const std::uint64_t half =
      static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) / 2;
  return half < kMax ? half : kMax;
}

[[noreturn]] void refuse(const std::filesystem::path& path, const std::string& why) {
  throw TraceFormatError("cannot read " + path.string() + ": " + why);
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] int get() const { return fd_; }

 private:
  int fd_;
};

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder, not a file";
  if (S_ISCHR(mode)) return "a character device, not a file";
  if (S_ISBLK(mode)) return "a block device, not a file";
  if (S_ISSOCK(mode)) return "a socket, not a file";
  return "not a file";
}

}  // namespace

std::string read_whole_file(const std::filesystem::path& path) {
  // O_NONBLOCK: opening a FIFO with no writer returns at once (then poll() waits, bounded).
  const int raw = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (raw < 0) {
    const int error = errno;
    if (error == ENOENT) refuse(path, "no such file");
    refuse(path, errno_text(error));
  }
  const Fd fd(raw);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) refuse(path, errno_text(errno));
  const bool fifo = S_ISFIFO(st.st_mode);
  const bool terminal = S_ISCHR(st.st_mode) && ::isatty(fd.get()) == 1;  // /dev/stdin from a tty
  if (!S_ISREG(st.st_mode) && !fifo && !terminal) refuse(path, kind_of(st.st_mode));
  if (fifo) {
    pollfd p{fd.get(), POLLIN, 0};
    int ready = 0;
    do {
      ready = ::poll(&p, 1, kFifoWaitMs);
    } while (ready < 0 && errno == EINTR);
    if (ready == 0) {
      refuse(path, fmt::format("a FIFO that nothing wrote to within {} s (start its writer first)",
                               kFifoWaitMs / 1000));
    }
  }
  // Blocking from here: a pipe's writer may pause; end of file ends the read.
  (void)::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);

  // A regular file's size is known, except for /proc and /sys files (size 0, content generated
  // on read): those and streams are read to their end, up to the cap.
  const bool sized = S_ISREG(st.st_mode) && st.st_size > 0;
  const std::uint64_t cap = sized ? static_cast<std::uint64_t>(st.st_size) : stream_cap();
  std::string data;
  if (sized) data.reserve(static_cast<std::size_t>(st.st_size));
  char chunk[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd.get(), chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) refuse(path, errno_text(errno));
    if (n == 0) break;
    if (data.size() + static_cast<std::size_t>(n) > cap) {
      if (sized) {  // the file grew while read: keep what its size said
        data.append(chunk, static_cast<std::size_t>(cap - data.size()));
        break;
      }
      refuse(path, fmt::format("more than {} bytes from a stream (a pipe, FIFO or generated "
                               "file); memscope reads at most half the machine's memory",
                               cap));
    }
    data.append(chunk, static_cast<std::size_t>(n));
  }
  return data;
}

}  // namespace memscope
