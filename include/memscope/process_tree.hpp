// The processes below one process (its children, their children, ...) as /proc shows them now,
// for `memscope run`: which processes are in the tree, and each one's RSS, kernel peak (VmHWM)
// and command line.
//
// A process is identified by its pid and its start time (field 22 of /proc/<pid>/stat, in clock
// ticks since boot) together, so a pid the kernel reuses during a long run is a new process.
// Only processes visible in this /proc (this PID namespace) are found; threads are not
// processes and are never listed.
//
// Thread safety: pure functions over /proc; call from any thread. Ownership: values.
// Errors: none thrown for a
// process that vanishes while it is read (it is left out, or its fields stay -1); scan_tree()
// throws std::system_error when /proc itself cannot be listed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memscope {

struct TreeProcess {
  int pid = 0;
  int ppid = 0;
  std::uint64_t start_ticks = 0;  // with pid, who this process is
  std::string comm;               // its name (/proc/<pid>/comm); changes when it execs
  std::int64_t rss = -1;          // VmRSS, bytes; -1 for a zombie or one that vanished
  std::int64_t hwm = -1;          // VmHWM, bytes; -1 likewise
  // Where its argv lives (arg_start, field 48 of stat): set by exec only, so a new value means
  // a new program in the process even when its name stays (python starting python). 0 where
  // the kernel does not say.
  std::uint64_t image = 0;
};

// Every process whose chain of parents reaches `root` (root itself excluded), parents before
// their children. Zombies are included (rss and hwm -1). Walks down from root through
// /proc/<pid>/task/<tid>/children where the kernel has them (work in proportion to the tree),
// else reads every process's stat. The children files may miss a child that appears or goes
// while they are read (proc(5)): callers check a process they knew with read_process() before
// they take it for ended, and see a new one at the next scan. MEMSCOPE_RUN_FULL_SCAN=1 forces
// the full scan (tests use it to cover both ways).
[[nodiscard]] std::vector<TreeProcess> scan_tree(int root);

// One process as scan_tree() would give it; nullopt when it has gone.
[[nodiscard]] std::optional<TreeProcess> read_process(int pid);

// The start time of `pid` (clock ticks since boot; with the pid, who the process is); readable
// for a zombie too. nullopt when the process has gone.
[[nodiscard]] std::optional<std::uint64_t> read_start_ticks(int pid);

// Whether `pid` has reaped (waited for) a child: the kernel adds a child's minor faults to its
// parent's cminflt (field 11 of stat) when the parent reaps it, and every process that ran has
// faulted. Readable for a zombie, so `memscope run` asks before it reaps one: wait4's ru_maxrss
// is then the largest of the process's own peak and those children's. nullopt when it has gone.
[[nodiscard]] std::optional<bool> read_reaped_a_child(int pid);

// /proc/<pid>/cmdline with the arguments joined by spaces; nullopt when it is empty or gone:
// a zombie, a kernel thread, or a process inside exec, whose new image has no arguments yet.
[[nodiscard]] std::optional<std::string> read_arguments(int pid);

// The name in /proc/<pid>/comm in brackets ("[python]"); "" when the process has gone.
[[nodiscard]] std::string bracketed_name(int pid);

// read_arguments(), or else bracketed_name().
[[nodiscard]] std::string read_command_line(int pid);

}  // namespace memscope
