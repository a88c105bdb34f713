// Stage marks for `memscope run` (stage_marks.hpp): one JSON line per mark, one write(2).
//
// Where marks go is resolved once per process and kept in an immutable MarkTarget published through
// an atomic pointer, so writers take no lock (a fork() while another thread writes cannot leave
// a lock held in the child). A target is checked again before each write (one fstat: marks are
// rare) because descriptors can change under us: a parent such as Python's subprocess or torchrun
// may have closed the inherited one, or the number may now name another file. After fork() the
// target is re-resolved so the child validates what it inherited.
#include "memscope/stage_marks.hpp"

#include <fcntl.h>
#include <limits.h>  // PIPE_BUF
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

#include "common/utf8.hpp"
#include "memscope/host_probe.hpp"
#include "tracker/stage_marks_detail.hpp"

namespace memscope {
namespace {

// Where this process writes marks. Never changed once published; replaced ones stay reachable
// through `previous` (they are few: one per process image, fork or lost descriptor).
struct MarkTarget {
  pid_t pid = 0;          // the process that resolved it
  int fd = -1;            // -1: marks are disabled
  bool owned = false;     // opened by us on MEMSCOPE_MARKS_PATH (O_NONBLOCK)
  bool blocking = false;  // the inherited descriptor without O_NONBLOCK: check room first
  dev_t dev = 0;          // the pipe, to notice a descriptor that now names something else
  ino_t ino = 0;
  const MarkTarget* previous = nullptr;
};

std::atomic<const MarkTarget*> g_target{nullptr};

bool same_file(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// The inherited descriptor, if MEMSCOPE_MARKS_FD names an open FIFO that is the same pipe as
// MEMSCOPE_MARKS_PATH (when that is set); -1 otherwise.
int inherited_fd(const char* fd_text, const struct stat* path_stat, struct stat& st) {
  if (fd_text == nullptr || *fd_text == '\0') return -1;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(fd_text, &end, 10);
  if (errno != 0 || *end != '\0' || value < 0 || value > INT_MAX) return -1;
  const int fd = static_cast<int>(value);
  if (::fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) return -1;
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY) return -1;
  if (path_stat != nullptr && !same_file(st, *path_stat)) return -1;
  return fd;
}

// Reads the variables and finds a descriptor of the pipe: the inherited one when it is valid and
// non-blocking, else one opened on the path with O_NONBLOCK (the same pipe), else the inherited
// blocking one (writes then check the room in the pipe first). Never throws.
MarkTarget resolve() noexcept {
  MarkTarget t;
  t.pid = ::getpid();
  // Read-only use of the environment, like every getenv in memscope.
  const char* path = std::getenv("MEMSCOPE_MARKS_PATH");   // NOLINT(concurrency-mt-unsafe)
  const char* fd_text = std::getenv("MEMSCOPE_MARKS_FD");  // NOLINT(concurrency-mt-unsafe)
  struct stat path_stat {};
  const bool have_path = path != nullptr && *path != '\0' && ::stat(path, &path_stat) == 0 &&
                         S_ISFIFO(path_stat.st_mode);
  struct stat st {};
  const int fd = inherited_fd(fd_text, have_path ? &path_stat : nullptr, st);
  if (fd >= 0 && (::fcntl(fd, F_GETFL) & O_NONBLOCK) != 0) {
    t.fd = fd;
    t.dev = st.st_dev;
    t.ino = st.st_ino;
    return t;
  }
  if (have_path) {
    // Opening a FIFO for writing with O_NONBLOCK fails (ENXIO) when nobody reads it: then
    // `memscope run` has gone and marks have nowhere to go.
    const int own = ::open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (own >= 0) {
      if (::fstat(own, &st) == 0 && same_file(st, path_stat)) {
        t.fd = own;
        t.owned = true;
        t.dev = st.st_dev;
        t.ino = st.st_ino;
        return t;
      }
      ::close(own);
    }
  }
  if (fd >= 0) {
    t.fd = fd;
    t.blocking = true;
    t.dev = st.st_dev;
    t.ino = st.st_ino;
  }
  return t;
}

// Whether `t` still names its pipe (nobody closed the descriptor or reused its number).
bool still_valid(const MarkTarget& t) noexcept {
  struct stat st {};
  return ::fstat(t.fd, &st) == 0 && st.st_dev == t.dev && st.st_ino == t.ino;
}

// The current target, resolving it on first use, after fork, or when `stale` (the one the caller
// found no longer valid) is still the published one. Never throws; null only without memory.
const MarkTarget* current_target(const MarkTarget* stale = nullptr) noexcept {
  const MarkTarget* t = g_target.load(std::memory_order_acquire);
  const pid_t pid = ::getpid();
  if (t != nullptr && t != stale && t->pid == pid) return t;
  // A forked child keeps what it inherited when that still names the pipe (its own copy now).
  const bool inherit = t != nullptr && t != stale && t->fd >= 0 && still_valid(*t);
  auto* fresh = new (std::nothrow) MarkTarget(inherit ? *t : resolve());
  if (fresh == nullptr) return nullptr;
  fresh->pid = pid;
  fresh->previous = t;
  if (g_target.compare_exchange_strong(t, fresh, std::memory_order_acq_rel)) return fresh;
  // Another thread resolved first: use its target.
  if (fresh->owned && !inherit) ::close(fresh->fd);
  delete fresh;
  return t;
}

void append_json_string(std::string& out, std::string_view text) {
  std::string storage;
  const std::string_view valid = detail::as_valid_utf8(text, storage);
  out += '"';
  for (const char c : valid) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(u));
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
}

std::int64_t monotonic_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::string format_mark(std::string_view kind, std::string_view stage,
                        const std::map<std::string, std::int64_t>& metrics) {
  std::int64_t hwm = -1;
  try {
    hwm = process_peak_rss();
  } catch (...) {  // NOLINT(bugprone-empty-catch): an unknown peak is written as -1
  }
  std::string line = R"({"memscope_mark":1,"kind":)";
  append_json_string(line, kind);
  line += R"(,"stage":)";
  append_json_string(line, stage);
  line += R"(,"pid":)" + std::to_string(::getpid());
  line += R"(,"t_ns":)" + std::to_string(monotonic_ns());
  line += R"(,"hwm":)" + std::to_string(hwm);
  if (!metrics.empty()) {
    line += R"(,"metrics":{)";
    bool first = true;
    for (const auto& [key, value] : metrics) {
      if (!first) line += ',';
      first = false;
      append_json_string(line, key);
      line += ':' + std::to_string(value);
    }
    line += '}';
  }
  line += "}\n";
  return line;
}

// Whether a write of `size` bytes to a blocking pipe would complete without waiting. Racy with
// other writers, which is the best a descriptor we may not make non-blocking allows.
bool room_for(int fd, std::size_t size) noexcept {
  int unread = 0;
  const int capacity = ::fcntl(fd, F_GETPIPE_SZ);
  if (capacity < 0 || ::ioctl(fd, FIONREAD, &unread) != 0) return false;
  return capacity - unread >= static_cast<int>(size);
}

// One write(2) of the whole line, with SIGPIPE blocked: a reader that has gone must not kill the
// process (EPIPE drops the mark, and the SIGPIPE it raised is consumed unless one was pending).
void write_line(const MarkTarget& t, const std::string& line) noexcept {
  if (t.blocking && !room_for(t.fd, line.size())) return;
  sigset_t pipe_only;
  sigset_t old_mask;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  sigset_t pending;
  sigemptyset(&pending);
  sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE) == 1;
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old_mask);
  ssize_t written = 0;
  do {
    written = ::write(t.fd, line.data(), line.size());
  } while (written < 0 && errno == EINTR);
  if (written < 0 && errno == EPIPE && !was_pending) {
    const timespec zero{};
    while (sigtimedwait(&pipe_only, nullptr, &zero) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
}

}  // namespace

bool stage_marks_enabled() noexcept {
  const MarkTarget* t = current_target();
  return t != nullptr && t->fd >= 0;
}

void write_stage_mark(std::string_view kind, std::string_view stage,
                      const std::map<std::string, std::int64_t>& metrics) noexcept {
  const MarkTarget* t = current_target();
  if (t == nullptr || t->fd < 0) return;
  if (!still_valid(*t)) {
    t = current_target(t);
    if (t == nullptr || t->fd < 0 || !still_valid(*t)) return;
  }
  try {
    const std::string line = format_mark(kind, stage, metrics);
    if (line.size() > PIPE_BUF) return;  // a longer write could interleave with others
    write_line(*t, line);
  } catch (...) {  // NOLINT(bugprone-empty-catch): without memory the mark is dropped
  }
}

void detail::reset_stage_marks() noexcept {
  const MarkTarget* t = g_target.exchange(nullptr, std::memory_order_acq_rel);
  // Only the newest owned descriptor is surely still ours: an older one may have been closed by
  // someone else and its number reused.
  if (t != nullptr && t->owned && t->pid == ::getpid() && still_valid(*t)) ::close(t->fd);
  while (t != nullptr) {
    const MarkTarget* previous = t->previous;
    delete t;
    t = previous;
  }
}

}  // namespace memscope
