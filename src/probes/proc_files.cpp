#include "probes/proc_files.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "common/proc_status.hpp"
#include "memscope/errors.hpp"

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

namespace {

std::int64_t maxrss_bytes() noexcept {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return -1;
  return static_cast<std::int64_t>(usage.ru_maxrss) * 1024;
}

// Linux keeps ru_maxrss across execve: a program exec'ed by a forked process starts with the
// high-water mark of the image it replaced, which is the parent's resident memory at the fork
// (a worker started by a 10 GB trainer reads 10 GB before it has touched anything). What
// ru_maxrss held when this library was loaded, where that was more than VmHWM then, is that
// inheritance; later readings up to it say nothing about this process.
// VmHWM as status shows it (the larger of the mark and the RSS now); -1 when unreadable.
std::int64_t own_status_hwm() noexcept {
  const Fd status = open_proc(0, "status", O_RDONLY);
  HostMemory m;
  if (!status.valid() || !read_status(status.get(), m)) return -1;
  return std::max(m.hwm, m.rss);
}

std::int64_t read_inherited_maxrss() noexcept {
  const std::int64_t maxrss = maxrss_bytes();
  const std::int64_t hwm = own_status_hwm();
  return maxrss >= 0 && hwm >= 0 && maxrss > hwm ? maxrss : 0;
}

std::int64_t inherited_maxrss() noexcept {
  static const std::int64_t inherited = read_inherited_maxrss();
  return inherited;
}

// Read at load, before the program has touched much: what is inherited is known only then.
[[maybe_unused]] const std::int64_t kInheritedAtLoad = inherited_maxrss();

}  // namespace

std::int64_t self_maxrss_bound() noexcept {
  const std::int64_t maxrss = maxrss_bytes();
  return maxrss < 0 ? INT64_MAX : maxrss;  // no bound: the caller reads status
}

std::int64_t self_maxrss_peak() noexcept {
  const std::int64_t maxrss = maxrss_bytes();
  return maxrss > inherited_maxrss() ? maxrss : 0;
}

std::int64_t self_high_water_mark() noexcept {
  if (const std::int64_t own = self_maxrss_peak(); own > 0) return own;
  return std::max<std::int64_t>(own_status_hwm(), 0);
}

std::int64_t read_status_threads(int fd) noexcept {
  char buf[kBufferSize];
  const std::size_t n = read_at_zero(fd, buf, sizeof buf);
  std::int64_t threads = 0;
  for_each_status_field({buf, n}, [&threads](std::string_view key, std::string_view value) {
    if (key != "Threads") return false;
    if (const std::optional<std::int64_t> v = take_number(value)) threads = *v;
    return true;
  });
  return threads;
}

bool rss_counters_are_per_cpu() noexcept {
  static const bool per_cpu = [] {
    utsname u{};
    if (uname(&u) != 0) return true;  // assume the current rule
    std::string_view release(static_cast<const char*>(u.release));
    const std::optional<std::int64_t> major = take_number(release);
    if (!release.empty() && release.front() == '.') release.remove_prefix(1);
    const std::optional<std::int64_t> minor = take_number(release);
    if (!major || !minor) return true;
    return *major > 6 || (*major == 6 && *minor >= 2);
  }();
  return per_cpu;
}

std::int64_t rss_counter_slack(std::int64_t threads) noexcept {
  constexpr std::int64_t kCounters = 3;  // MM_ANONPAGES, MM_FILEPAGES, MM_SHMEMPAGES
  if (rss_counters_are_per_cpu()) {
    // Once: sysconf reads /sys for the online CPUs, and stages ask at every stop.
    static const std::int64_t per_cpu_slack = [] {
      const std::int64_t cpus = std::max<std::int64_t>(1, sysconf(_SC_NPROCESSORS_ONLN));
      const std::int64_t batch = std::max<std::int64_t>(32, 2 * cpus);
      return kCounters * (batch - 1) * cpus * page_size();
    }();
    return per_cpu_slack;
  }
  constexpr std::int64_t kTaskRssEvents = 64;
  return kCounters * kTaskRssEvents * std::max<std::int64_t>(1, threads) * page_size();
}

void throw_process_gone(int pid, const char* file) {
  const std::string error = errno_text(errno);
  throw BackendError("memscope: cannot read /proc/" + std::to_string(pid) + "/" + file + " (" +
                     error + "); the process has probably exited");
}

}  // namespace memscope::detail
