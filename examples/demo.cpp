// memscope_demo (`make demo`): the torch.cuda.empty_cache() story, replayed on memscope.
//
// Phase 1 shows why empty_cache() sometimes releases nothing: a small tensor allocated where a
// big one was freed is carved out of the big one's cached segment, and a segment goes back to
// the system only when nothing in it is live. Phase 2 runs a training-like loop twice, keeping
// the cache and calling empty_cache() every step, to show that emptying the cache each step
// does not lower the peak, it only pays for the memory again every step.
//
// It runs on the CUDA backend when one is usable and on the host backend otherwise (there,
// reserved memory is resident memory, so the process RSS shows what the allocator holds).
// main() is a sequence of phase functions so each phase can be wrapped in a tracker stage.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "memscope/backend.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/errors.hpp"
#include "memscope/units.hpp"
#include "proc_memory.hpp"

namespace {

using memscope::Backend;
using memscope::CachingAllocator;
using memscope::format_bytes;

constexpr int kLoopIterations = 100;

// Bytes of a float32 tensor of the given shape.
std::size_t float32_bytes(std::initializer_list<std::size_t> shape) {
  std::size_t n = sizeof(float);
  for (const std::size_t d : shape) n *= d;
  return n;
}

std::string bytes(std::int64_t n) {
  return format_bytes(n);
}
std::string bytes(std::size_t n) {
  return format_bytes(static_cast<std::int64_t>(n));
}

// Fills a buffer the way a kernel writing its output would, where the CPU can reach it.
void touch(const Backend& backend, void* p, std::size_t n) {
  if (backend.memory_kind() == memscope::MemoryKind::host) std::memset(p, 1, n);
}

// Phase 0: the CUDA backend when it works here, the host backend otherwise (saying why).
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

// One row per step: what the allocator holds and what the process has resident.
class StepTable {
 public:
  explicit StepTable(const CachingAllocator& allocator) : allocator_(allocator) {
    fmt::print("\n{:<44}{:>12}{:>12}{:>14}\n", "step", "allocated", "reserved", "process RSS");
  }
  void row(const std::string& step) const {
    const memscope::MemoryStats s = allocator_.stats();
    fmt::print("{:<44}{:>12}{:>12}{:>14}\n", step, bytes(s.allocated_bytes[0].current),
               bytes(s.reserved_bytes[0].current), bytes(memscope::demo::current_rss_bytes()));
  }

 private:
  const CachingAllocator& allocator_;
};

// Phase 1: x = 512x3x512x512, del x, y = 1x3x512x512, empty_cache(), del y, empty_cache().
void show_empty_cache_scenario(const std::shared_ptr<Backend>& backend) {
  fmt::print("\nPhase 1: why empty_cache() can release nothing\n");
  CachingAllocator allocator(backend, memscope::AllocatorConfig{});
  const StepTable table(allocator);
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

struct LoopResult {
  std::string name;
  std::int64_t rss_before = 0;
  std::int64_t peak_rss = 0;
  bool peak_rss_reset = false;  // false: VmHWM could not be reset; it is the process's peak
  std::int64_t peak_reserved = 0;
  std::int64_t segments_reserved = 0;
  double seconds = 0;
};

// One training-like step: a batch and the working buffers a forward pass would write.
void training_step(CachingAllocator& allocator) {
  const Backend& backend = allocator.backend();
  const std::size_t sizes[] = {
      float32_bytes({120, 3, 224, 224}),  // the input batch
      float32_bytes({120, 16, 56, 56}),   // a first feature map
      float32_bytes({120, 32, 28, 28}),   // a second feature map
      float32_bytes({120, 1000}),         // logits
  };
  std::vector<void*> buffers;
  for (const std::size_t n : sizes) {
    buffers.push_back(allocator.allocate(n));
    touch(backend, buffers.back(), n);
  }
  for (auto it = buffers.rbegin(); it != buffers.rend(); ++it) allocator.deallocate(*it);
}

// Phases 2 and 3: the loop with the cache kept, then with empty_cache() after every step.
LoopResult run_training_loop(const std::shared_ptr<Backend>& backend, bool empty_each_step) {
  LoopResult result;
  result.name = empty_each_step ? "empty_cache() every step" : "cache kept";
  CachingAllocator allocator(backend, memscope::AllocatorConfig{});
  result.rss_before = memscope::demo::current_rss_bytes();
  result.peak_rss_reset = memscope::demo::reset_peak_rss();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kLoopIterations; ++i) {
    training_step(allocator);
    if (empty_each_step) (void)allocator.empty_cache();
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.peak_rss = memscope::demo::peak_rss_bytes().value_or(0);
  const memscope::MemoryStats stats = allocator.stats();
  result.peak_reserved = stats.reserved_bytes[0].peak;
  result.segments_reserved = stats.num_device_alloc;
  return result;
}

void print_loop_results(const std::vector<LoopResult>& results) {
  fmt::print(
      "\nPhases 2-3: {} steps of a 120x3x224x224 float32 batch ({}) and three working buffers,\n"
      "written with memset, all freed at the end of each step\n\n",
      kLoopIterations, bytes(float32_bytes({120, 3, 224, 224})));
  fmt::print("{:<28}{:>12}{:>12}{:>15}{:>11}{:>9}\n", "run", "RSS before", "peak RSS",
             "peak reserved", "reserves", "time");
  for (const LoopResult& r : results) {
    fmt::print("{:<28}{:>12}{:>12}{:>15}{:>11}{:>8.2f}s\n", r.name, bytes(r.rss_before),
               bytes(r.peak_rss), bytes(r.peak_reserved), r.segments_reserved, r.seconds);
  }
  if (!results.empty() && !results.front().peak_rss_reset) {
    fmt::print(
        "(peak RSS is the process's peak since it started: /proc/self/clear_refs is not "
        "writable here)\n");
  }
  fmt::print(
      "\nEmptying the cache every step leaves the peak where it was (each step needs the same\n"
      "memory) and reserves every segment again each step ('reserves' counts the segments\n"
      "reserved from the backend). Call empty_cache() to hand memory to another process, not\n"
      "in a loop.\n");
}

}  // namespace

int main() {
  try {
    const std::shared_ptr<Backend> backend = choose_backend();
    show_empty_cache_scenario(backend);
    std::vector<LoopResult> results;
    results.push_back(run_training_loop(backend, false));
    results.push_back(run_training_loop(backend, true));
    print_loop_results(results);
    return 0;
  } catch (const memscope::Error& e) {
    std::fprintf(stderr, "memscope_demo: %s\n", e.what());
    return 1;
  }
}
