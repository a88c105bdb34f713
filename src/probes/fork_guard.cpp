// ForkGuard: pthread_atfork handlers over every probe and tracker, level by level.
#include "probes/fork_guard.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <vector>

namespace memscope::detail {
namespace {

constexpr int kLevels = static_cast<int>(ForkLevel::probe) + 1;

struct Level {
  std::mutex mutex;  // guards `hooks`; held from before fork until after it
  std::vector<ForkHooks*> hooks;
};

// Never destroyed: objects with static storage may unregister after static destructors ran.
std::array<Level, kLevels>& levels() {
  static auto* const all =
      new std::array<Level, kLevels>();  // NOLINT(cppcoreguidelines-owning-memory)
  return *all;
}

// How many prepare handlers of this fork have run in this thread: the handlers may be registered
// several times and act only on the first prepare and the last parent/child call.
thread_local int fork_depth = 0;

void prepare() noexcept {
  if (fork_depth++ > 0) return;
  for (Level& level : levels()) {
    level.mutex.lock();
    for (ForkHooks* h : level.hooks) h->before_fork();
  }
}

template <void (ForkHooks::*after)() noexcept>
void release() noexcept {
  if (--fork_depth > 0) return;
  auto& all = levels();
  for (auto level = all.rbegin(); level != all.rend(); ++level) {
    for (ForkHooks* h : level->hooks) (h->*after)();
    level->mutex.unlock();
  }
}

void parent() noexcept {
  release<&ForkHooks::after_fork_parent>();
}
void child() noexcept {
  release<&ForkHooks::after_fork_child>();
}

void install() {
  (void)pthread_atfork(&prepare, &parent, &child);
}

void install_once() {
  static std::once_flag once;
  std::call_once(once, install);
}

}  // namespace

void add_fork_hooks(ForkLevel level, ForkHooks& hooks) {
  install_once();
  Level& l = levels()[static_cast<std::size_t>(level)];
  std::lock_guard lock(l.mutex);
  l.hooks.push_back(&hooks);
}

void remove_fork_hooks(ForkLevel level, ForkHooks& hooks) noexcept {
  Level& l = levels()[static_cast<std::size_t>(level)];
  std::lock_guard lock(l.mutex);
  std::erase(l.hooks, &hooks);
}

void register_fork_handlers_last() {
  install_once();
  static std::mutex mutex;
  static int registrations = 0;
  std::lock_guard lock(mutex);
  // Each registration costs an entry in the C library's list and three calls per fork; a
  // program makes few allocator sources, but cap it anyway.
  constexpr int kMaxRegistrations = 64;
  if (registrations >= kMaxRegistrations) return;
  ++registrations;
  install();
}

void reopen_self_proc(int fd, const char* name, int flags) noexcept {
  if (fd < 0) return;
  // Built by hand: snprintf is not async-signal-safe.
  static constexpr char kPrefix[] = "/proc/self/";
  char path[64] = {};
  const std::size_t prefix = sizeof kPrefix - 1;
  const std::size_t length = std::min(std::strlen(name), sizeof path - prefix - 1);
  std::copy_n(kPrefix, prefix, path);
  std::copy_n(name, length, path + prefix);  // path[prefix + length] stays '\0'
  const int fresh = ::open(path, flags | O_CLOEXEC);
  if (fresh < 0) return;
  (void)::dup3(fresh, fd, O_CLOEXEC);
  ::close(fresh);
}

}  // namespace memscope::detail
