// Cost of the stage tracker: start+stop of one stage in each mode, and the overhead on a
// training-like loop (tracker on vs off, measured alternately in the same run) for the
// kernel-hwm mode, the sampling fallback, and a Trainer-style busy-polling thread as the
// baseline. Results and command lines: docs/benchmarks-tracker.md.
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "memscope/caching_allocator.hpp"
#include "memscope/host_probe.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/tracker.hpp"
#include "memscope/units.hpp"

namespace {

using memscope::GiB;
using memscope::HostProbeOptions;
using memscope::MemoryTracker;
using memscope::MiB;
using memscope::TrackerOptions;

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// ---- start+stop of one stage ----------------------------------------------------------------

enum StageSetup { kHost, kHostNested, kHostAndDevice, kDevice, kSampling, kSkip };

void BM_StageStartStop(benchmark::State& state) {
  const auto setup = static_cast<StageSetup>(state.range(0));
  memscope::CachingAllocator gpu(std::make_shared<memscope::SimulatedBackend>(64 * GiB));
  TrackerOptions options;
  options.implicit_init = false;
  switch (setup) {
    case kHost:
    case kHostNested:
      options.sources = {memscope::make_host_source()};
      break;
    case kHostAndDevice:
      options.sources = {memscope::make_host_source(), memscope::make_allocator_source(gpu)};
      break;
    case kDevice:
      options.sources = {memscope::make_allocator_source(gpu)};
      break;
    case kSampling:
      options.sources = {memscope::make_host_source(HostProbeOptions{.force_sampling = true})};
      break;
    case kSkip:
      options.skip_memory_metrics = true;
      break;
  }
  MemoryTracker tracker(options);
  // Nested: an outer stage is running, so every start folds VmHWM into it before resetting.
  if (setup == kHostNested) tracker.start("outer");
  for (auto _ : state) {
    tracker.start("step");
    tracker.stop("step");
  }
  if (setup == kHostNested) tracker.stop("outer");
  state.SetLabel(tracker.describe_sources());
}
BENCHMARK(BM_StageStartStop)
    ->ArgName("setup")
    ->Arg(kHost)
    ->Arg(kHostNested)
    ->Arg(kHostAndDevice)
    ->Arg(kDevice)
    ->Arg(kSampling)
    ->Arg(kSkip)
    ->Unit(benchmark::kMicrosecond);

// The raw probe window, without the tracker's bookkeeping.
void BM_HostWindowOpenClose(benchmark::State& state) {
  memscope::HostProbe probe(HostProbeOptions{.force_sampling = state.range(0) != 0});
  for (auto _ : state) {
    auto w = probe.open_window();
    benchmark::DoNotOptimize(w.close());
  }
  state.SetLabel(probe.mode_name());
}
BENCHMARK(BM_HostWindowOpenClose)
    ->ArgName("sampling")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMicrosecond);

// ---- a training-like loop, tracker on vs off ---------------------------------------------

// One step: map, touch and unmap a few activation-sized buffers, so RSS moves every step
// and page faults contend with whatever reads /proc in the background.
void training_step() {
  for (std::size_t bytes : {64 * memscope::KiB, 256 * memscope::KiB, 1 * MiB}) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    std::memset(p, 1, bytes);
    benchmark::ClobberMemory();
    munmap(p, bytes);
  }
}

constexpr int kSteps = 1000;

enum Watcher { kNone, kKernelOneStage, kKernelStagePerStep, kSamplingOneStage, kBusyPoll };

// The Hugging Face Trainer's peak monitor: a thread reading RSS in a loop with no sleep.
class BusyPoller {
 public:
  BusyPoller()
      : thread_([this] {
          memscope::HostProbe probe(HostProbeOptions{.force_sampling = true});
          while (!stop_.load(std::memory_order_relaxed)) {
            peak_ = std::max(peak_, probe.current_rss());
          }
        }) {}
  ~BusyPoller() {
    stop_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::int64_t peak_ = 0;
  std::thread thread_;
};

struct RunCost {
  double wall = 0;
  double cpu = 0;
};

// Starts `watcher`: a tracker running a "train" stage, or the busy-polling thread.
void start_watcher(Watcher watcher, std::optional<MemoryTracker>& tracker,
                   std::optional<BusyPoller>& poller) {
  if (watcher == kKernelOneStage || watcher == kKernelStagePerStep) {
    tracker.emplace(TrackerOptions{.sources = {memscope::make_host_source()}});
  } else if (watcher == kSamplingOneStage) {
    tracker.emplace(TrackerOptions{
        .sources = {memscope::make_host_source(HostProbeOptions{.force_sampling = true})}});
  } else if (watcher == kBusyPoll) {
    poller.emplace();
  }
  if (tracker) tracker->start("train");
}

RunCost run_loop(Watcher watcher) {
  std::optional<MemoryTracker> tracker;
  std::optional<BusyPoller> poller;
  const double wall0 = wall_seconds();
  const double cpu0 = process_cpu_seconds();
  start_watcher(watcher, tracker, poller);
  for (int i = 0; i < kSteps; ++i) {
    if (watcher == kKernelStagePerStep) tracker->start("step");
    training_step();
    if (watcher == kKernelStagePerStep) tracker->stop("step");
  }
  if (tracker) tracker->stop("train");
  tracker.reset();
  poller.reset();
  return {wall_seconds() - wall0, process_cpu_seconds() - cpu0};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2);
}

// Each iteration runs the loop without and with the watcher back to back, alternating which
// goes first, and keeps the ratio of the pair; the median over pairs shrugs off bursts of load
// from other processes. Watcher kNone (off vs off) measures that noise floor.
void BM_TrainingLoop(benchmark::State& state) {
  const auto watcher = static_cast<Watcher>(state.range(0));
  RunCost off;
  RunCost on;
  std::vector<double> wall_ratios;
  std::vector<double> cpu_ratios;
  bool on_first = false;
  for (auto _ : state) {
    RunCost a = run_loop(on_first ? watcher : kNone);
    RunCost b = run_loop(on_first ? kNone : watcher);
    const RunCost& with = on_first ? a : b;
    const RunCost& without = on_first ? b : a;
    on.wall += with.wall;
    on.cpu += with.cpu;
    off.wall += without.wall;
    off.cpu += without.cpu;
    wall_ratios.push_back(with.wall / without.wall);
    cpu_ratios.push_back(with.cpu / without.cpu);
    on_first = !on_first;
  }
  const auto n = static_cast<double>(state.iterations());
  state.counters["off_ms"] = off.wall / n * 1e3;
  state.counters["on_ms"] = on.wall / n * 1e3;
  state.counters["off_cpu_ms"] = off.cpu / n * 1e3;
  state.counters["on_cpu_ms"] = on.cpu / n * 1e3;
  state.counters["wall_ratio"] = median(wall_ratios);
  state.counters["cpu_ratio"] = median(cpu_ratios);
}
BENCHMARK(BM_TrainingLoop)
    ->ArgName("watcher")
    ->Arg(kNone)
    ->Arg(kKernelOneStage)
    ->Arg(kKernelStagePerStep)
    ->Arg(kSamplingOneStage)
    ->Arg(kBusyPoll)
    ->Iterations(10)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// CPU the watcher itself burns while the program does nothing: the main thread sleeps for
// 200 ms inside a running stage. Counter: CPU seconds per wall second (1.0 = a whole core).
void BM_WatcherIdleCpu(benchmark::State& state) {
  const auto watcher = static_cast<Watcher>(state.range(0));
  double cpu = 0;
  double wall = 0;
  for (auto _ : state) {
    std::optional<MemoryTracker> tracker;
    std::optional<BusyPoller> poller;
    start_watcher(watcher, tracker, poller);
    const double cpu0 = process_cpu_seconds();
    const double wall0 = wall_seconds();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cpu += process_cpu_seconds() - cpu0;
    wall += wall_seconds() - wall0;
  }
  state.counters["cpu_per_wall_s"] = cpu / wall;
}
BENCHMARK(BM_WatcherIdleCpu)
    ->ArgName("watcher")
    ->Arg(kKernelOneStage)
    ->Arg(kSamplingOneStage)
    ->Arg(kBusyPoll)
    ->Iterations(5)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
