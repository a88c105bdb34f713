// memscope_demo (`make demo`): the torch.cuda.empty_cache() story, replayed on memscope, with
// every phase measured by memscope's own stage tracker.
//
// Phase 1 shows why empty_cache() sometimes releases nothing: a small tensor allocated where a
// big one was freed is carved out of the big one's cached segment, and a segment goes back to
// the system only when nothing in it is live. Phases 2 and 3 run a training-like loop twice,
// keeping the cache and calling empty_cache() every step, to show that emptying the cache each
// step does not lower the peak, it only pays for the memory again every step.
//
// It runs on the CUDA backend when one is usable and on the host backend otherwise (there,
// reserved memory is resident memory, so the process RSS shows what the allocator holds). On
// CUDA the tables also show the process's GPU memory as NVML (nvidia-smi) sees it.
//
// Phase 2 is recorded by the allocator itself (start_recording) and written as a PyTorch
// memory snapshot, demo_trace.pickle in the output folder; phase 4 replays it on a simulated
// device, to show what the allocator's rules cost on that workload: peak reserved over peak
// live, next to what the allocator held when recording stopped. Given a snapshot (a real one
// recorded by PyTorch on a GPU, say), phase 4 replays that instead.
//
// Usage: memscope_demo [output folder for the metrics JSON and the trace, default
//                       memscope-demo-results] [snapshot.pickle, default the demo's own trace]
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "device_view.hpp"
#include "memscope/backend.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/errors.hpp"
#include "memscope/host_probe.hpp"
#include "memscope/metrics.hpp"
#include "memscope/trace.hpp"
#include "memscope/tracker.hpp"
#include "memscope/units.hpp"

namespace {

using memscope::Backend;
using memscope::CachingAllocator;
using memscope::HostProbe;

constexpr int kTrainSteps = 100;
constexpr int kEvalSteps = 10;  // evaluation and test steps

// Bytes of a float32 tensor of the given shape.
std::size_t float32_bytes(std::initializer_list<std::size_t> shape) {
  std::size_t n = sizeof(float);
  for (const std::size_t d : shape) n *= d;
  return n;
}

std::string bytes(std::int64_t n) {
  return memscope::format_bytes(n);
}
std::string bytes(std::size_t n) {
  return bytes(static_cast<std::int64_t>(n));
}

// The CUDA backend when it works here, the host backend otherwise (saying why).
std::shared_ptr<Backend> choose_backend() {
  try {
    std::shared_ptr<Backend> cuda = memscope::make_backend("cuda");
    fmt::print("backend: {} (device memory; process RSS does not include it)\n", cuda->name());
    return cuda;
  } catch (const memscope::Error& e) {
    fmt::print("backend: host (the CUDA backend is unavailable: {})\n", e.what());
    return memscope::make_backend("host");
  }
}

// Fills a buffer the way a kernel writing its output would, where the CPU can reach it.
void touch(const Backend& backend, void* p, std::size_t n) {
  if (backend.memory_kind() == memscope::MemoryKind::host) std::memset(p, 1, n);
}

// One row per step: what the allocator holds, what the process has resident, and on CUDA
// what NVML says the process uses on the device.
class StepTable {
 public:
  StepTable(const CachingAllocator& allocator, const HostProbe& host, const DeviceView& device)
      : allocator_(allocator), host_(host), device_(device) {
    fmt::print("\n{:<44}{:>12}{:>12}{:>14}{}\n", "step", "allocated", "reserved", "process RSS",
               device_.available() ? fmt::format("{:>18}", "GPU used (NVML)") : "");
  }
  void row(const std::string& step) const {
    const memscope::MemoryStats s = allocator_.stats();
    fmt::print("{:<44}{:>12}{:>12}{:>14}{}\n", step, bytes(s.allocated_bytes[0].current),
               bytes(s.reserved_bytes[0].current), bytes(host_.current_rss()),
               device_.available() ? fmt::format("{:>18}", device_.process_used()) : "");
  }

 private:
  const CachingAllocator& allocator_;
  const HostProbe& host_;
  const DeviceView& device_;
};

// Phase 1: x = 512x3x512x512, del x, y = 1x3x512x512, empty_cache(), del y, empty_cache().
void show_empty_cache_scenario(CachingAllocator& allocator, const HostProbe& host,
                               const DeviceView& device) {
  fmt::print("\nPhase 1: why empty_cache() can release nothing\n");
  const StepTable table(allocator, host, device);
  table.row("start");
  const std::size_t x_bytes = float32_bytes({512, 3, 512, 512});
  void* x = allocator.allocate(x_bytes);
  table.row(fmt::format("x = 512x3x512x512 float32 ({})", bytes(x_bytes)));
  allocator.deallocate(x);
  table.row("del x (its segment stays cached)");
  const std::size_t y_bytes = float32_bytes({1, 3, 512, 512});
  void* y = allocator.allocate(y_bytes);
  table.row(fmt::format("y = 1x3x512x512 float32 ({})", bytes(y_bytes)));
  std::size_t released = allocator.empty_cache();
  table.row(fmt::format("empty_cache() released {}", bytes(released)));
  allocator.deallocate(y);
  released = allocator.empty_cache();
  table.row(fmt::format("del y; empty_cache() released {}", bytes(released)));
  fmt::print(
      "\ny was carved out of x's cached segment (best fit, then split), so the first\n"
      "empty_cache() could not hand that segment back: a segment is released only when no\n"
      "block in it is live. PyTorch's caching allocator behaves the same way.\n");
}

}  // namespace

// Outside the anonymous namespace, exported (ENABLE_EXPORTS in examples/CMakeLists.txt) and
// never inlined, so that the trace's C++ stacks name it: the allocations of phase 2 are blamed
// on demo::step instead of "<no frames>".
namespace demo {

// One step: a batch and the buffers a forward pass writes (and, training, the gradients).
void step(CachingAllocator& allocator, bool training);
#if defined(__GNUC__) && !defined(__clang__)
#define DEMO_NAMED_IN_STACKS [[gnu::noipa]]  // no inlining, no constprop clone (a local symbol)
#else
#define DEMO_NAMED_IN_STACKS [[gnu::noinline]]
#endif
DEMO_NAMED_IN_STACKS void step(CachingAllocator& allocator, bool training) {
  const Backend& backend = allocator.backend();
  std::vector<std::size_t> sizes = {
      float32_bytes({120, 3, 224, 224}),  // the input batch
      float32_bytes({120, 16, 56, 56}),   // a first feature map
      float32_bytes({120, 32, 28, 28}),   // a second feature map
      float32_bytes({120, 1000}),         // logits
  };
  if (training) sizes.push_back(float32_bytes({120, 16, 56, 56}));  // its gradient
  std::vector<void*> buffers;
  for (const std::size_t n : sizes) {
    buffers.push_back(allocator.allocate(n));
    touch(backend, buffers.back(), n);
  }
  for (auto it = buffers.rbegin(); it != buffers.rend(); ++it) allocator.deallocate(*it);
}

}  // namespace demo

namespace {

using demo::step;

struct LoopResult {
  std::string name;
  std::int64_t peak_rss = 0;
  std::int64_t peak_reserved = 0;
  std::int64_t reserves = 0;  // segments reserved from the backend during the run
  double seconds = 0;
};

// Phases 2 and 3: the loop from a cold cache, measuring its own peaks. (reset_peak_stats()
// does not disturb the tracker's stages: peak scopes are independent of it.)
LoopResult run_loop(CachingAllocator& allocator, HostProbe& host, memscope::MemoryTracker& tracker,
                    bool empty_each_step) {
  LoopResult r;
  r.name = empty_each_step ? "empty_cache() every step" : "cache kept";
  (void)allocator.empty_cache();
  allocator.reset_peak_stats();
  const std::int64_t reserves_before = allocator.stats().num_device_alloc;
  HostProbe::Window rss = host.open_window();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kTrainSteps; ++i) {
    step(allocator, /*training=*/true);
    if (empty_each_step) (void)allocator.empty_cache();
    if (!empty_each_step && i == kTrainSteps / 2) {  // an evaluation in the middle of training
      auto eval = tracker.stage("eval");
      for (int j = 0; j < kEvalSteps; ++j) step(allocator, /*training=*/false);
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.peak_rss = rss.close().peak;
  const memscope::MemoryStats stats = allocator.stats();
  r.peak_reserved = stats.reserved_bytes[0].peak;
  r.reserves = stats.num_device_alloc - reserves_before;
  return r;
}

void print_loop_results(const std::vector<LoopResult>& results) {
  fmt::print(
      "\nPhases 2-3: {} training steps of a 120x3x224x224 float32 batch ({}) and four working\n"
      "buffers, all freed at the end of each step (the first run evaluates {} steps halfway)\n\n",
      kTrainSteps, bytes(float32_bytes({120, 3, 224, 224})), kEvalSteps);
  fmt::print("{:<28}{:>12}{:>15}{:>11}{:>9}\n", "run", "peak RSS", "peak reserved", "reserves",
             "time");
  for (const LoopResult& r : results) {
    fmt::print("{:<28}{:>12}{:>15}{:>11}{:>8.2f}s\n", r.name, bytes(r.peak_rss),
               bytes(r.peak_reserved), r.reserves, r.seconds);
  }
  fmt::print(
      "\nEmptying the cache every step leaves the peak where it was (each step needs the same\n"
      "memory) and reserves every segment again each step ('reserves' counts the segments\n"
      "reserved from the backend). Call empty_cache() to hand memory to another process, not\n"
      "in a loop.\n");
}

// Phase 4: a trace, replayed through memscope's default rules on a simulated device.
void replay_trace(const std::string& snapshot_path) {
  fmt::print("\nPhase 4: a trace replayed on a simulated device\n");
  const memscope::TorchSnapshot snapshot = memscope::read_torch_snapshot_file(snapshot_path);
  const memscope::ReplayPlan plan = memscope::build_replay_plan(snapshot);
  const memscope::ReplayResult r = memscope::replay(plan);
  const auto ratio = [](std::size_t a, std::size_t b) {
    return static_cast<double>(a) / static_cast<double>(b);
  };
  fmt::print("{}\n{} allocations and frees; peak live (requested) {}\n\n", snapshot_path,
             plan.ops.size(), bytes(plan.peak_live));
  fmt::print("{:<36}{:>15}{:>22}\n", "", "reserved", "reserved / live");
  fmt::print("{:<36}{:>15}{:>22.4f}\n", "memscope default rules, at the peak",
             bytes(r.peak_reserved), r.reserved_over_peak_live);
  // What the recording allocator held when the snapshot was taken (PyTorch's real traces never
  // release a segment while recording, so for them it is their peak).
  fmt::print("{:<36}{:>15}{:>22.4f}\n", "recorder, held at the snapshot",
             bytes(plan.reserved_at_dump), ratio(plan.reserved_at_dump, plan.peak_live));
  fmt::print(
      "\nThe gap between reserved and live is fragmentation: cached pieces of segments too\n"
      "small or on the wrong side of a live block. `memscope_replay_bench` compares settings.\n");
}

// The tracker's sources: the process RSS, the allocator (as "gpu" on a device, else as a
// second "cpu" source) and, on CUDA, the device as NVML sees it.
std::vector<std::shared_ptr<memscope::MemorySource>> tracker_sources(
    CachingAllocator& allocator, const std::shared_ptr<HostProbe>& host, const DeviceView& device) {
  const bool on_device = allocator.backend().memory_kind() == memscope::MemoryKind::device;
  std::vector<std::shared_ptr<memscope::MemorySource>> sources = {
      memscope::make_host_source(host),
      memscope::make_allocator_source(
          allocator, on_device ? memscope::SourceKind::gpu : memscope::SourceKind::cpu)};
  if (device.available()) sources.push_back(device.tracker_source());
  return sources;
}

int run(const std::string& output_dir, const std::string& given_snapshot) {
  const std::shared_ptr<Backend> backend = choose_backend();
  CachingAllocator allocator(backend, memscope::AllocatorConfig::from_env());
  const DeviceView device(*backend);
  auto host = std::make_shared<HostProbe>();
  memscope::MemoryTracker tracker({.sources = tracker_sources(allocator, host, device)});
  fmt::print("tracker sources: {}\n", tracker.describe_sources());

  {
    auto init = tracker.stage("init");  // reported as init_* with the first stage, as Trainer does
    show_empty_cache_scenario(allocator, *host, device);
  }
  std::vector<LoopResult> results;
  memscope::TorchSnapshot own;  // phase 2 as the allocator recorded it, replayed in phase 4
  {
    auto train = tracker.stage("train");
    allocator.start_recording({.cpp_stacks = true});  // the sites of the replay's tables
    results.push_back(run_loop(allocator, *host, tracker, /*empty_each_step=*/false));
    allocator.stop_recording();
    own = allocator.recorded_snapshot();  // with the segments cached at the end of phase 2
  }
  {
    auto test = tracker.stage("test");
    for (int j = 0; j < kEvalSteps; ++j) step(allocator, /*training=*/false);
  }
  results.push_back(run_loop(allocator, *host, tracker, /*empty_each_step=*/true));
  print_loop_results(results);

  // Each stage's metrics go to {stage}_results.json and merge into all_results.json, as the
  // Trainer's save_metrics does; init's ride with the first stage reported (train).
  memscope::Metrics all;
  for (const char* stage : {"train", "eval", "test"}) {
    memscope::Metrics metrics;
    tracker.update_metrics(stage, metrics);
    memscope::save_metrics(stage, metrics, output_dir);
    all.insert(metrics.begin(), metrics.end());
  }
  fmt::print("\nStage metrics (Hugging Face Trainer names; eval ran inside train):\n");
  memscope::log_metrics("all", all);
  fmt::print(
      "\nwrote {0}/train_results.json, eval_results.json, test_results.json and "
      "all_results.json\n",
      output_dir);
  const std::string own_trace = (std::filesystem::path(output_dir) / "demo_trace.pickle").string();
  memscope::write_torch_snapshot(own, own_trace);
  fmt::print("wrote {} (phase 2, recorded by the allocator)\n", own_trace);
  replay_trace(given_snapshot.empty() ? own_trace : given_snapshot);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc > 1 ? argv[1] : "memscope-demo-results", argc > 2 ? argv[2] : "");
  } catch (const memscope::Error& e) {
    std::fprintf(stderr, "memscope_demo: %s\n", e.what());
    return 1;
  }
}
