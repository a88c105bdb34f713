// ForkGuard: what memscope's probes and trackers do around fork(), so that a child forked while
// another thread is inside one of them cannot deadlock, and reads its own /proc files.
//
// pthread_atfork handlers walk every registered ForkHooks object, level by level in the lock
// order of docs/design.md ("Threads and lock order"): trackers, then the kernel-mode domain
// registry, then the host peak domains, then the probes. Before fork each object takes its own
// lock (so no copied lock is held by a thread that does not exist in the child); after fork the
// parent releases, and the child releases and takes back what belonged to the parent: files
// opened on /proc/self (they name the parent's pid) are reopened onto the same descriptor
// numbers, sampling threads (which do not exist in the child) restart when next needed.
//
// The allocator sits below the tracker in the lock order, so these handlers must run before any
// allocator's own prepare handler: pthread_atfork runs prepare handlers in reverse order of
// registration, and register_fork_handlers_last() registers them again (idempotently: the
// handlers act once per fork, however often they are registered).
//
// Thread safety: add/remove may be called from any thread, but not while holding a lock of a
// lower level than the one registered. The hooks run in the forking thread only.
#pragma once

namespace memscope::detail {

class ForkHooks {
 public:
  ForkHooks() = default;
  ForkHooks(const ForkHooks&) = delete;
  ForkHooks& operator=(const ForkHooks&) = delete;
  virtual ~ForkHooks() = default;

  virtual void before_fork() noexcept = 0;        // take this object's lock
  virtual void after_fork_parent() noexcept = 0;  // release it
  virtual void after_fork_child() noexcept = 0;   // release it and reinitialise
};

// Top to bottom of the lock order.
enum class ForkLevel : int { tracker = 0, domain_registry, domain, probe };

// Registers `hooks` (which must stay alive until removed) and installs the handlers once.
void add_fork_hooks(ForkLevel level, ForkHooks& hooks);
void remove_fork_hooks(ForkLevel level, ForkHooks& hooks) noexcept;

// Registers the atfork handlers again, so they run before every prepare handler registered
// so far (an allocator's, whose lock the tracker may take while holding its own).
void register_fork_handlers_last();

// Reopens /proc/self/<name> in a forked child onto descriptor `fd`, which was opened on the
// parent's file. Async-signal-safe. On failure `fd` stays as it was.
void reopen_self_proc(int fd, const char* name, int flags) noexcept;

}  // namespace memscope::detail
