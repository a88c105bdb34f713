#include "probes/proc_files.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <optional>
#include <string_view>

#include "common/proc_status.hpp"

namespace memscope::detail {
namespace {

// /proc/<pid>/status is about 1.5 KB; the fields we need are in its first half even on
// machines whose CPU and node masks make the file longer, so 4 KiB always holds them.
constexpr std::size_t kBufferSize = 4096;

std::int64_t page_size() noexcept {
  static const std::int64_t size = sysconf(_SC_PAGESIZE);
  return size;
}

// One pread at offset 0: seq_file regenerates the whole text for a read at offset 0 and hands
// back as much as fits, so a second call would only cost a syscall to learn about EOF.
std::size_t read_at_zero(int fd, char* buf, std::size_t size) noexcept {
  ssize_t n = 0;
  do {
    n = pread(fd, buf, size, 0);
  } while (n < 0 && errno == EINTR);
  return n > 0 ? static_cast<std::size_t>(n) : 0;
}

}  // namespace

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

Fd::~Fd() noexcept {
  if (fd_ >= 0) ::close(fd_);
}

void proc_path(int pid, const char* name, char* out, std::size_t size) noexcept {
  if (pid == 0) {
    std::snprintf(out, size, "/proc/self/%s", name);
  } else {
    std::snprintf(out, size, "/proc/%d/%s", pid, name);
  }
}

Fd open_proc(int pid, const char* name, int flags) noexcept {
  char path[64];
  proc_path(pid, name, path, sizeof path);
  return Fd(::open(path, flags | O_CLOEXEC));
}

bool parse_status(const char* text, std::size_t length, HostMemory& out) noexcept {
  struct Field {
    std::string_view key;
    std::int64_t* target;
    bool seen;
  };
  Field fields[] = {{"VmHWM", &out.hwm, false},
                    {"VmRSS", &out.rss, false},
                    {"RssAnon", &out.rss_anon, false},
                    {"RssFile", &out.rss_file, false},
                    {"RssShmem", &out.rss_shmem, false}};
  for_each_status_field({text, length}, [&fields](std::string_view key, std::string_view value) {
    for (Field& f : fields) {
      if (f.seen || key != f.key) continue;
      if (const std::optional<std::int64_t> bytes = status_kib_as_bytes(value)) {
        *f.target = *bytes;
        f.seen = true;
      }
      break;
    }
    return false;
  });
  // RssAnon/RssFile/RssShmem arrived in Linux 4.5; only the totals are required.
  return fields[0].seen && fields[1].seen;
}

bool parse_statm(const char* text, std::size_t length, std::int64_t& rss) noexcept {
  std::string_view rest(text, length);
  const std::optional<std::int64_t> size_pages = take_number(rest);
  const std::optional<std::int64_t> resident_pages = take_number(rest);
  if (!size_pages || !resident_pages) return false;
  rss = *resident_pages * page_size();
  return true;
}

bool read_status(int fd, HostMemory& out) noexcept {
  char buf[kBufferSize];
  std::size_t n = read_at_zero(fd, buf, sizeof buf);
  return n > 0 && parse_status(buf, n, out);
}

bool read_statm(int fd, std::int64_t& rss) noexcept {
  char buf[128];
  std::size_t n = read_at_zero(fd, buf, sizeof buf);
  return n > 0 && parse_statm(buf, n, rss);
}

std::int64_t self_maxrss_bound() noexcept {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return INT64_MAX;  // no bound: caller reads status
  return static_cast<std::int64_t>(usage.ru_maxrss) * 1024;
}

}  // namespace memscope::detail
