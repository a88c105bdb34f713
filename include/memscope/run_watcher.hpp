// What `memscope run` learns about its command's process tree while it runs: samples of every
// process's RSS and kernel peak (VmHWM) and GPU memory, the exit of each process it reaps, and
// the stage marks; finish() turns it into a RunRecord with each process's peak and where that
// peak came from, and the rank of a distributed job each process's environment names, grouped
// into the record's ranks (run_ranks.hpp).
//
// Peak RSS of a process = the largest of (since its last exec, seen as a new name or a new
// arg_start: a launcher's child shows the launcher's pages until it execs)
//   - the highest VmHWM read while it lived ("VmHWM" when it was still alive at the end of the
//     run, so the reading is final; "sampled" when it ended between two samples: a lower
//     bound, exact unless it grew in its last interval),
//   - the "hwm" of its stage marks ("marks": its tracker's lifetime peak, kept although the
//     tracker's kernel-hwm windows reset VmHWM),
//   - wait4's ru_maxrss when memscope reaped it. The kernel folds into that figure the peaks
//     of the children the process reaped itself (RUSAGE_CHILDREN semantics), so it is the
//     process's own ("wait4": exact; an earlier reading above it by no more than twice the RSS
//     counters' slack is their drift, and wait4 stands) only when the process reaped no child
//     (its zombie's cminflt is 0, and no child of it was seen ending), or when its own VmHWM,
//     sampled earlier, is already that high (within twice the slack). Otherwise its own VmHWM
//     is preferred where a sample read it ("sampled"), and a process no sample saw keeps
//     wait4's figure as kWait4OrChild ("wait4: it or a reaped child").
//
// Thread safety: one thread. Errors: sample() throws std::system_error when /proc cannot be
// listed; NVML errors turn GPU watching off with the reason in gpu_status and notes.
// Ownership: the watcher owns the record it builds (and its NVML probe) until finish() hands the
// record over.
#pragma once

#include <sys/resource.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "memscope/watched_run.hpp"

namespace memscope {

class NvmlProbe;

// The command of a process that ended before any sample saw it, known from its stage marks.
inline constexpr const char* kKnownFromMarks = "(ended between samples; known from its marks)";

// The source of a peak that is wait4's ru_maxrss of a process that reaped children and that no
// sample saw: the largest of its own peak and theirs.
inline constexpr const char* kWait4OrChild = "wait4: it or a reaped child";

// The command of a process that ended before its command line could be read.
inline constexpr const char* kCommandUnread = "(ended before its command line was read)";

class RunWatcher {
 public:
  // `self`: the runner's pid (the root of the tree, not itself watched). `watch_gpu`: false
  // never touches NVML (gpu_status says so). Made before the command starts, so NVML's slow
  // first initialisation does not delay the first sample.
  RunWatcher(int self, double interval, bool watch_gpu);
  RunWatcher(const RunWatcher&) = delete;
  RunWatcher& operator=(const RunWatcher&) = delete;
  ~RunWatcher() noexcept;

  // When the command started (CLOCK_MONOTONIC); every time in the record counts from it.
  void set_start(std::int64_t start_ns) noexcept { start_ns_ = start_ns; }
  // Reads the tree now.
  void sample(std::int64_t now_ns);
  // What is read from a zombie before wait4 reaps it (0, "" and nullopt where that failed).
  struct Zombie {
    std::uint64_t start_ticks = 0;
    std::string command;
    std::optional<bool> reaped_a_child;  // read_reaped_a_child(); nullopt: unknown, maybe
  };
  // A process memscope reaped: its zombie's facts, its wait status and rusage.
  void reaped(int pid, const Zombie& zombie, int status, const rusage& usage, std::int64_t now_ns);
  void add_marks(std::vector<RunMark>& marks);
  void add_note(std::string note) { record_.notes.push_back(std::move(note)); }

  // For the progress line.
  [[nodiscard]] std::size_t processes_alive() const noexcept { return alive_; }
  [[nodiscard]] std::int64_t last_tree_rss() const noexcept {
    return record_.tree_rss.empty() ? 0 : record_.tree_rss.back();
  }

  // Takes a last sample and completes the record (peaks, stages, summary figures).
  [[nodiscard]] RunRecord finish(std::int64_t now_ns, std::vector<std::string> command,
                                 double start_unix, int exit_code);

 private:
  struct Tracked {
    int pid = 0;
    std::uint64_t start_ticks = 0;
    std::string comm;  // when it changes, the process has exec'd: read its command line again
    std::uint64_t image = 0;  // TreeProcess::image: when it changes, the process has exec'd
    // Its command line was empty when read, so its command is its name in brackets: read again
    // at each sample. A sample inside an exec sees the new image before its arguments.
    bool arguments_unread = false;
    double last_alive = -1.0;
    std::int64_t hwm_max = -1;
    std::int64_t wait4_maxrss = -1;
    bool ended = false;
    bool reaped_by_us = false;
    // It reaped a child (its zombie said so, or a child of it was seen ending under it): its
    // wait4 ru_maxrss may be that child's.
    bool reaped_children = false;
    bool alive_at_end = false;
  };

  [[nodiscard]] double seconds(std::int64_t ns) const noexcept;
  [[nodiscard]] std::size_t track(int pid, std::uint64_t start_ticks, int ppid, double t,
                                  const std::string& command);
  void ended(std::size_t index, double t);
  // Sets the command of process `index` from /proc (see Tracked::arguments_unread).
  void read_command(std::size_t index);
  void adopt_marked(const RunMark& mark);
  void sample_gpu(std::map<int, std::int64_t>& per_pid);
  void stop_gpu(const std::string& why);
  void decide_peaks();

  int self_;
  std::int64_t start_ns_ = 0;
  RunRecord record_;
  std::vector<Tracked> tracked_;  // parallel to record_.processes
  std::map<std::pair<int, std::uint64_t>, std::size_t> by_identity_;
  std::size_t alive_ = 0;
  std::unique_ptr<NvmlProbe> nvml_;
  bool gpu_watched_ = false;  // the per-sample GPU vectors are being filled
};

}  // namespace memscope
