#include "memscope/run_watcher.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <exception>
#include <optional>
#include <set>

#include "memscope/device_probe.hpp"
#include "memscope/errors.hpp"
#include "memscope/host_info.hpp"
#include "memscope/process_tree.hpp"
#include "memscope/rank_env.hpp"
#include "memscope/run_marks.hpp"
#include "memscope/run_ranks.hpp"
#include "probes/proc_files.hpp"

namespace memscope {
namespace {

// MemTotal, and the tightest memory cgroup limit below it (-1: none).
void read_host_limits(RunRecord& record) {
  HostInfo host;
  try {
    host = read_host_info();
  } catch (const BackendUnavailableError&) {  // no /proc/meminfo: the cgroup may still say
    host.cgroup = read_cgroup_memory();
  }
  record.host_total = host.mem_total;
  const std::int64_t limit = host.cgroup.limit;
  if (limit > 0 && (record.host_total <= 0 || limit < record.host_total))
    record.cgroup_limit = limit;
}

}  // namespace

RunWatcher::RunWatcher(int self, double interval, bool watch_gpu) : self_(self) {
  record_.interval = interval;
  read_host_limits(record_);
  if (!watch_gpu) {
    record_.gpu_status = "not watched";
    return;
  }
  const Availability nvml = NvmlProbe::available();
  if (!nvml.available) {
    record_.gpu_status = "NVML unavailable: " + nvml.reason;
    return;
  }
  try {
    nvml_ = std::make_unique<NvmlProbe>();
    for (unsigned i = 0; i < nvml_->device_count(); ++i) {
      RunGpu gpu;
      gpu.index = i;
      gpu.name = nvml_->device(i).name;
      gpu.total = static_cast<std::int64_t>(nvml_->memory(i).total);
      record_.gpus.push_back(std::move(gpu));
    }
    record_.gpu_status = "nvml";
    gpu_watched_ = true;
  } catch (const std::exception& e) {
    nvml_.reset();
    record_.gpus.clear();
    record_.gpu_status = std::string("NVML failed: ") + e.what();
  }
}

RunWatcher::~RunWatcher() noexcept = default;

double RunWatcher::seconds(std::int64_t ns) const noexcept {
  return static_cast<double>(ns - start_ns_) / 1e9;
}

std::size_t RunWatcher::track(int pid, std::uint64_t start_ticks, int ppid, double t,
                              const std::string& command) {
  const auto [it, added] = by_identity_.try_emplace({pid, start_ticks}, tracked_.size());
  if (added) {
    RunProcess process;
    process.pid = pid;
    process.ppid = ppid;
    process.command = command;
    process.start = t;
    record_.processes.push_back(std::move(process));
    Tracked state;
    state.pid = pid;
    state.start_ticks = start_ticks;
    tracked_.push_back(state);
    ++alive_;
    if (command.empty()) read_command(it->second);
  }
  return it->second;
}

void RunWatcher::read_command(std::size_t index) {
  const int pid = tracked_[index].pid;
  std::optional<std::string> arguments = read_arguments(pid);
  tracked_[index].arguments_unread = !arguments;
  record_.processes[index].command = arguments ? std::move(*arguments) : bracketed_name(pid);
}

void RunWatcher::ended(std::size_t index, double t) {
  Tracked& state = tracked_[index];
  if (state.ended) return;
  state.ended = true;
  --alive_;
  RunProcess& process = record_.processes[index];
  process.end = state.last_alive >= 0 ? state.last_alive : t;
  // Its parent reaps it, and the kernel folds its peak into the parent's ru_maxrss, and from
  // there into the grandparent's once that reaps the parent, and so on up to us. We may notice
  // the end of a child only after its parent has ended, so every ancestor is told.
  int parent = process.ppid;
  std::size_t below = index;
  for (int hops = 0; parent != self_ && hops < 4096; ++hops) {
    std::size_t found = tracked_.size();
    for (std::size_t i = tracked_.size(); i-- > 0;) {
      if (tracked_[i].pid == parent && i != below) {
        found = i;
        break;
      }
    }
    if (found == tracked_.size()) break;  // an ancestor we never saw
    tracked_[found].reaped_children = true;
    below = found;
    parent = record_.processes[found].ppid;
  }
}

void RunWatcher::stop_gpu(const std::string& why) {
  record_.gpu_status = "NVML failed during the run: " + why;
  record_.notes.push_back("GPU memory was not watched after " + std::to_string(record_.t.size()) +
                          " samples: " + why);
  nvml_.reset();
}

void RunWatcher::sample_gpu(std::map<int, std::int64_t>& per_pid) {
  if (!nvml_) return;
  try {
    for (RunGpu& gpu : record_.gpus) {
      gpu.used.push_back(static_cast<std::int64_t>(nvml_->memory(gpu.index).used));
      for (const GpuProcess& p : nvml_->processes(gpu.index)) {
        if (p.used_bytes)
          per_pid[static_cast<int>(p.pid)] += static_cast<std::int64_t>(*p.used_bytes);
      }
    }
  } catch (const std::exception& e) {
    stop_gpu(e.what());
  }
  // Every GPU's vector keeps one value per sample.
  for (RunGpu& gpu : record_.gpus) {
    if (gpu.used.size() < record_.t.size()) gpu.used.push_back(-1);
  }
}

void RunWatcher::sample(std::int64_t now_ns) {
  const double t = seconds(now_ns);
  record_.t.push_back(t);
  std::map<int, std::int64_t> gpu_by_pid;
  sample_gpu(gpu_by_pid);
  const bool gpu_known = nvml_ != nullptr;

  std::set<std::size_t> seen;
  std::int64_t tree_rss = 0;
  std::int64_t tree_gpu = 0;
  const auto take = [&](const TreeProcess& p) {
    const std::size_t index = track(p.pid, p.start_ticks, p.ppid, t, "");
    seen.insert(index);
    RunProcess& process = record_.processes[index];
    Tracked& state = tracked_[index];
    process.ppid = p.ppid;  // it may have been reparented to us
    if (state.ended) return;
    if (p.rss < 0) {  // a zombie: it has exited
      ended(index, t);
      return;
    }
    // A new program in the process (exec): its name may change, where its arguments live
    // always does. Its peak starts there: a launcher's child shows the launcher's pages from
    // its fork to its exec (torchrun's ranks: 550 MB of torch, then a 280 MB rank), and those
    // were never the new program's. Its environment may be another one.
    const bool execd =
        !state.comm.empty() && (state.comm != p.comm || (p.image != state.image && p.image != 0));
    if (execd) {
      process.rank = {};
      state.hwm_max = -1;
    }
    if (execd || state.arguments_unread) read_command(index);
    state.comm = p.comm;
    state.image = p.image;
    // Until a rank is found the environment is read again at every sample: a launcher's child
    // shows the launcher's environment between its fork and its exec, and the exec need not
    // change its name (python starting python).
    if (!process.rank.rank) process.rank = read_rank_env(p.pid);
    state.last_alive = t;
    state.hwm_max = std::max(state.hwm_max, p.hwm);
    process.t.push_back(t);
    process.rss.push_back(p.rss);
    tree_rss += p.rss;
    if (gpu_watched_) {
      std::int64_t gpu = -1;
      if (gpu_known) {
        const auto it = gpu_by_pid.find(p.pid);
        gpu = it == gpu_by_pid.end() ? 0 : it->second;
        if (gpu > 0) process.peak_gpu = std::max(process.peak_gpu, gpu);
        tree_gpu += gpu;
      }
      process.gpu.push_back(gpu);
    }
  };
  for (const TreeProcess& p : scan_tree(self_)) take(p);
  // One the scan did not list has ended, unless the children files missed it (they can while
  // processes come and go): then it is still there, with the same start time.
  const std::size_t known = tracked_.size();
  for (std::size_t i = 0; i < known; ++i) {
    if (tracked_[i].ended || seen.count(i) != 0) continue;
    const std::optional<TreeProcess> p = read_process(tracked_[i].pid);
    if (p && p->start_ticks == tracked_[i].start_ticks) {
      take(*p);
    } else {
      ended(i, t);
    }
  }
  record_.tree_rss.push_back(tree_rss);
  if (gpu_watched_) record_.tree_gpu.push_back(gpu_known ? tree_gpu : -1);
  if (tree_rss > record_.peak_tree_rss) {
    record_.peak_tree_rss = tree_rss;
    record_.peak_tree_rss_t = t;
  }
}

void RunWatcher::reaped(int pid, const Zombie& zombie, int status, const rusage& usage,
                        std::int64_t now_ns) {
  const double t = seconds(now_ns);
  const std::string& command = zombie.command;
  std::size_t index = tracked_.size();
  if (zombie.start_ticks != 0) {
    index = track(pid, zombie.start_ticks, self_, t, command);
  } else {  // its identity could not be read: the latest process with this pid
    for (std::size_t i = tracked_.size(); i-- > 0;) {
      if (tracked_[i].pid == pid && !tracked_[i].reaped_by_us) {
        index = i;
        break;
      }
    }
    if (index == tracked_.size()) index = track(pid, 0, self_, t, command);
  }
  Tracked& state = tracked_[index];
  RunProcess& process = record_.processes[index];
  state.reaped_by_us = true;
  if (zombie.reaped_a_child.value_or(true)) state.reaped_children = true;
  state.wait4_maxrss = static_cast<std::int64_t>(usage.ru_maxrss) * 1024;  // KiB
  if (WIFEXITED(status)) process.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) process.exit_signal = WTERMSIG(status);
  if (state.last_alive < 0) state.last_alive = t;  // never sampled: it lived between samples
  ended(index, t);
  process.end = t;
}

void RunWatcher::add_marks(std::vector<RunMark>& marks) {
  for (RunMark& mark : marks) {
    // Known: a process of that pid that runs, or ended so recently that the mark is its own
    // (marks are read after the sample that saw it end); the rule decide_peaks() applies.
    bool known = false;
    for (std::size_t i = 0; i < tracked_.size() && !known; ++i) {
      known = tracked_[i].pid == mark.pid &&
              (!tracked_[i].ended || mark.t <= record_.processes[i].end + 2 * record_.interval);
    }
    if (!known) adopt_marked(mark);
    record_.marks.push_back(std::move(mark));
  }
  marks.clear();
}

// A mark from a process no sample has seen: it started after the last sample, or it lived less
// than an interval and was reaped by its own parent (a Python subprocess that ran one stage).
// Read it now if it still runs; else keep it as a process known only from its marks, so its
// stages have a process and its tracker's peak is not lost.
void RunWatcher::adopt_marked(const RunMark& mark) {
  if (const std::optional<TreeProcess> p = read_process(mark.pid)) {
    const std::size_t index = track(p->pid, p->start_ticks, p->ppid, mark.t, "");
    Tracked& state = tracked_[index];
    if (p->rss >= 0 && !state.ended) {
      state.last_alive = mark.t;
      state.hwm_max = std::max(state.hwm_max, p->hwm);
      state.comm = p->comm;
      state.image = p->image;
    }
    return;
  }
  const std::size_t index = track(mark.pid, 0, 0, mark.t, kKnownFromMarks);
  tracked_[index].last_alive = std::max(tracked_[index].last_alive, mark.t);
  ended(index, mark.t);
  RunProcess& process = record_.processes[index];
  process.end = std::max(process.end, mark.t);
}

void RunWatcher::decide_peaks() {
  const std::int64_t slack = detail::rss_counter_slack(1);
  for (std::size_t i = 0; i < tracked_.size(); ++i) {
    const Tracked& state = tracked_[i];
    RunProcess& process = record_.processes[i];
    std::int64_t marks_hwm = -1;
    for (const RunMark& mark : record_.marks) {
      // A mark belongs to the process of its pid that had started by then (pids are reused).
      if (mark.pid != state.pid || mark.t < process.start - 2 * record_.interval) continue;
      if (process.end >= 0 && mark.t > process.end + 2 * record_.interval) continue;
      marks_hwm = std::max(marks_hwm, mark.hwm);
    }
    // wait4's figure is the largest of the process's own peak and those of the children it
    // reaped. It is its own when it reaped none, or when its own VmHWM, read earlier, is already
    // as high (within the counters' drift). Otherwise the process's own VmHWM, when a sample
    // read it, is preferred; a process no sample saw has only wait4's figure, labelled for what
    // it is.
    const bool wait4_exact =
        state.reaped_by_us &&
        (!state.reaped_children ||
         (state.hwm_max >= 0 && state.wait4_maxrss <= state.hwm_max + 2 * slack));
    const bool wait4_only = state.reaped_by_us && !wait4_exact && state.hwm_max < 0;
    // The largest figure wins; on a tie, the better-founded source: the kernel's figures for a
    // process at its end (wait4, or VmHWM read while it still runs), then its tracker's, then
    // a VmHWM read some time before it ended.
    const auto consider = [&process](std::int64_t value, const char* source) {
      if (value >= 0 && value > process.peak_rss) {
        process.peak_rss = value;
        process.peak_rss_source = source;
      }
    };
    if (wait4_exact) consider(state.wait4_maxrss, "wait4");
    if (wait4_only) consider(state.wait4_maxrss, kWait4OrChild);
    if (state.alive_at_end) consider(state.hwm_max, "VmHWM");
    // wait4's figure is read after the process's last page was counted, so an earlier reading
    // above it differs only by the kernel's per-CPU counter drift (seen under ASan): each of the
    // two approximate reads may be off by the slack, one up and one down, and within twice the
    // slack the final figure stands.
    const std::int64_t drift = wait4_exact ? 2 * slack : 0;
    const auto consider_earlier = [&](std::int64_t value, const char* source) {
      if (value > process.peak_rss + drift) consider(value, source);
    };
    consider_earlier(marks_hwm, "marks");
    if (!state.alive_at_end) consider_earlier(state.hwm_max, "sampled");
  }
}

RunRecord RunWatcher::finish(std::int64_t now_ns, std::vector<std::string> command,
                             double start_unix, int exit_code) {
  sample(now_ns);
  for (std::size_t i = 0; i < tracked_.size(); ++i) {
    if (!tracked_[i].ended) {
      tracked_[i].alive_at_end = true;
      record_.processes[i].end = -1.0;
    }
  }
  decide_peaks();
  for (RunProcess& process : record_.processes) {
    // A process that exec'd and ended within one scan leaves no command line to read.
    if (process.command.empty()) process.command = kCommandUnread;
  }
  record_.command = std::move(command);
  record_.start_unix = start_unix;
  record_.duration = seconds(now_ns);
  record_.exit_code = exit_code;
  record_.stages =
      pair_stages(record_.marks, record_.t, record_.tree_rss, record_.tree_gpu, record_.duration);
  record_.ranks = group_ranks(record_);
  return std::move(record_);
}

}  // namespace memscope
