// What `memscope run` learns about a command's process tree, as plain values: every process
// with its RSS and GPU memory over time and its peak (and where that peak came from), the stage
// marks its processes wrote and the stages they pair into, the GPUs, and the ranks of a
// distributed job. RunWatcher (run_watcher.hpp) fills a RunRecord; the command writes it as JSON
// ("format": "memscope-run", tools/memscope/run/run_record.hpp) and renders it.
//
// Times are seconds since the command started; memory in bytes; -1 where a number is unknown.
//
// Thread safety: plain values, no shared state. Ownership: every member is owned by value.
// Errors: none.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "memscope/rank_env.hpp"

namespace memscope {

struct RunProcess {
  int pid = 0;
  int ppid = 0;
  std::string command;  // its command line, arguments joined by spaces
  double start = 0.0;   // first seen
  double end = -1.0;    // last seen alive; -1: still running when the run ended
  std::int64_t peak_rss = -1;
  // Where peak_rss came from: "VmHWM" (the kernel's high-water mark read after the peak),
  // "wait4" (ru_maxrss when memscope reaped it), "marks" (reported by the process's tracker
  // before it reset VmHWM), "sampled" (VmHWM was last read before the process ended: a lower
  // bound).
  std::string peak_rss_source;
  std::int64_t peak_gpu = -1;      // -1: no GPU memory was ever attributed to it
  std::optional<int> exit_code;    // when memscope reaped it
  std::optional<int> exit_signal;  // killed by this signal
  // RSS and GPU memory over time, one value per sample while it lived.
  std::vector<double> t;
  std::vector<std::int64_t> rss;
  std::vector<std::int64_t> gpu;  // empty when no GPU is watched
  // The rank of a distributed job its environment names (rank_env.hpp); rank unset when it
  // names none or could not be read. In the JSON as "rank": {"rank", "variable", "local_rank",
  // "world_size", "local_world_size"} (null for what is unset), absent for no rank.
  RankEnv rank;
};

// A stage mark a process wrote to MEMSCOPE_MARKS_FD (include/memscope/stage_marks.hpp).
struct RunMark {
  double t = 0.0;
  int pid = 0;
  std::string kind;  // "begin" or "end"
  std::string stage;
  std::int64_t hwm = -1;  // the process's lifetime peak RSS as its tracker knew it
  std::map<std::string, std::int64_t> metrics;  // at "end": cpu_peaked_delta, gpu_alloc_delta...
};

// A stage from a begin and its end mark (same pid and name); end = -1 if it never ended.
struct RunStage {
  std::string name;
  int pid = 0;
  double begin = 0.0;
  double end = -1.0;
  std::int64_t tree_rss_peak = -1;  // highest sampled tree RSS during the stage
  std::int64_t gpu_peak = -1;       // highest sampled GPU memory of the tree during the stage
  std::map<std::string, std::int64_t> metrics;  // the end mark's exact figures
};

struct RunGpu {
  unsigned index = 0;  // NVML index
  std::string name;
  std::int64_t total = -1;
  std::vector<std::int64_t> used;  // device-wide used memory, one per sample
};

// One rank of a distributed job (torchrun, mpirun): the processes whose environment names that
// rank (run_ranks.hpp says how they are grouped and summed).
struct RunRank {
  int rank = 0;
  std::string variable;  // where the rank came from: "RANK", "OMPI_COMM_WORLD_RANK", ...
  std::optional<int> local_rank;
  std::optional<int> world_size;
  std::optional<int> local_world_size;
  int pid = 0;            // the rank's own process: the first whose parent is not of this rank
  std::string command;    // its command line
  std::vector<int> pids;  // every process of the rank, its own first
  // The rank's peak: its own process's peak, or the highest sample of all its processes'
  // summed RSS where that is larger (run_ranks.hpp); peak_rss_source says which.
  std::int64_t peak_rss = -1;
  std::string peak_rss_source;         // its own process's source, or "sampled sum"
  std::int64_t own_peak_rss = -1;      // the peak of its own process alone
  std::int64_t sampled_peak_rss = -1;  // highest sample of the rank's processes' summed RSS
  std::int64_t sum_of_peaks = -1;      // every process's own peak summed: an upper bound
  std::int64_t peak_gpu = -1;          // sum of its processes' GPU peaks; -1: none seen
  double start = 0.0;                  // its own process's first sighting
  double end = -1.0;                   // and its end; -1: still running at the end
  std::optional<int> exit_code;        // its own process's, when memscope reaped it
  std::optional<int> exit_signal;
  std::vector<std::string> stages;  // the stages its processes marked, in order of begin
};

struct RunRecord {
  std::vector<std::string> command;
  double start_unix = 0.0;  // when the command started, seconds since the epoch
  double duration = 0.0;
  double interval = 0.1;  // sampling interval, seconds
  int exit_code = 0;      // what memscope run exited with (the child's code, 128+N, 12x)
  std::optional<int> child_exit_code;
  std::optional<int> child_signal;
  std::string gpu_status;  // "nvml" or why GPU memory was not watched
  std::int64_t host_total = -1;
  std::int64_t cgroup_limit = -1;      // -1: no limit
  std::vector<double> t;               // sample times
  std::vector<std::int64_t> tree_rss;  // summed RSS of the tree, one per sample
  std::vector<std::int64_t> tree_gpu;  // summed GPU memory of the tree's processes, per sample
  std::vector<RunGpu> gpus;
  std::vector<RunProcess> processes;  // in order of first appearance
  std::vector<RunMark> marks;         // in order of arrival
  std::vector<RunStage> stages;       // in order of begin
  // Per rank of a distributed job, sorted by rank; empty when no process named a rank.
  // Optional in the JSON (absent: none).
  std::vector<RunRank> ranks;
  std::int64_t peak_tree_rss = -1;  // highest sample of tree_rss
  double peak_tree_rss_t = 0.0;
  // What a reader should know about how the figures were taken ("3 lines on the marks pipe were
  // not marks"). Optional in the JSON (absent: none).
  std::vector<std::string> notes;
};

}  // namespace memscope
