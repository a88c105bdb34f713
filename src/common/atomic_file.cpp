#include "memscope/atomic_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "common/errno_text.hpp"
#include "memscope/errors.hpp"

namespace memscope {
namespace {

[[noreturn]] void fail(const std::string& what, const std::filesystem::path& path, int error) {
  throw BackendError("memscope: cannot " + what + " " + path.string() + " (" +
                     detail::errno_text(error) + ")");
}

void fsync_folder(const std::filesystem::path& folder) {
  int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // the rename happened; durability of the folder entry is best effort
  (void)::fsync(fd);
  ::close(fd);
}

// Removes the temporary file unless released (after the rename).
class TempFile {
 public:
  explicit TempFile(std::filesystem::path path) : path_(std::move(path)) {}
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  void release() { path_.clear(); }

 private:
  std::filesystem::path path_;
};

void write_all(int fd, std::string_view content, const std::filesystem::path& path) {
  std::size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      fail("write", path, error);
    }
    written += static_cast<std::size_t>(n);
  }
}

// Not a regular file (a character device such as /dev/null, a FIFO, a terminal, a socket, a
// pipe behind /dev/stdout): replacing it would destroy it, so write into it instead.
void stream_into(const std::filesystem::path& path, std::string_view content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) fail("open", path, errno);
  write_all(fd, content, path);
  if (::close(fd) != 0 && errno != EINTR) fail("close", path, errno);
}

// What `path` leads to, when it is a symbolic link: the file replaced is the one it names, and
// the link stays. A link into /proc or /dev (/dev/stdout -> /proc/self/fd/1 -> a file the shell
// opened) is written through, never replaced: the reader holds the old file open.
struct Target {
  std::filesystem::path path;
  bool stream = false;
};

Target resolve(const std::filesystem::path& path) {
  struct stat link {};
  if (::lstat(path.c_str(), &link) != 0 || !S_ISLNK(link.st_mode)) return {path, false};
  std::error_code error;
  const std::filesystem::path target = std::filesystem::weakly_canonical(path, error);
  if (error) return {path, false};
  const std::string text = target.string();
  const bool special = text.starts_with("/proc/") || text.starts_with("/dev/");
  return {target, special};
}

}  // namespace

void write_file_atomically(const std::filesystem::path& requested, std::string_view content,
                           const std::function<void()>& before_rename) {
  static std::atomic<unsigned> counter{0};
  const Target target = resolve(requested);
  struct stat existing {};
  const bool exists = ::stat(target.path.c_str(), &existing) == 0;
  if (exists && S_ISDIR(existing.st_mode)) fail("write", requested, EISDIR);
  if (target.stream || (exists && !S_ISREG(existing.st_mode))) {
    stream_into(requested, content);
    return;
  }
  const std::filesystem::path& path = target.path;
  const std::filesystem::path folder =
      path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  // Hidden, unique per process and call, in the target's folder (rename cannot cross file
  // systems). O_EXCL never reuses a stale file left by a crash.
  // (fmt rather than string operator+, which trips GCC 12's false -Wrestrict at -O2.)
  const std::filesystem::path temp = folder / fmt::format(".{}.{}.{}.tmp", path.filename().string(),
                                                          getpid(), counter.fetch_add(1));
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) fail("create a temporary file next to", path, errno);
  TempFile guard(temp);
  // The replaced file keeps its permissions (a 0600 file stays private).
  if (exists && ::fchmod(fd, existing.st_mode & 07777) != 0) {
    const int error = errno;
    ::close(fd);
    fail("keep the permissions of", path, error);
  }
  write_all(fd, content, temp);
  if (::fsync(fd) != 0) {
    int error = errno;
    ::close(fd);
    fail("flush", temp, error);
  }
  if (::close(fd) != 0) fail("close", temp, errno);

  if (before_rename) before_rename();
  if (::rename(temp.c_str(), path.c_str()) != 0) fail("replace", path, errno);
  guard.release();
  fsync_folder(folder);
}

FolderLock::FolderLock(const std::filesystem::path& folder) {
  fd_ = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) fail("open folder", folder, errno);
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    int error = errno;
    ::close(fd_);
    fail("lock folder", folder, error);
  }
}

FolderLock::~FolderLock() noexcept {
  ::close(fd_);  // releases the lock
}

}  // namespace memscope
