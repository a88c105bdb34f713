// memscope_gpu_peers: memscope's caching allocator on a real GPU against the allocators a CUDA
// program could use instead, measured by one loop in one process (docs/gpu.md, "Peers"):
//
//   memscope                 CachingAllocator on CudaBackend(0), default settings
//   memscope-expandable      the same with expandable_segments:true
//   memscope-expandable-page-16MiB, -32MiB   ... with that large-pool page (a mapping each)
//   cudaMallocAsync          the device's default pool, release threshold at the maximum
//   cudaMalloc               cudaMalloc / cudaFree (no cache; pairs and the first trace only)
//   <plug-in>                an allocator behind bench/gpu_peer.h, loaded with --peer NAME=PATH
//                            (PyTorch's caching allocator: bench/gpu_peer_torch.cpp)
//
// Two measures, printed as JSON lines (the fields of the 2026-12-04 run's peers.jsonl):
//   {"kind":"pair",...}    ns per cache-hit allocate+free pair at 512 B, 64 KiB, 2 MiB, 64 MiB,
//                          the best of --reps repetitions of --pairs pairs
//   {"kind":"replay",...}  every trace given, replayed as its allocations and frees (memscope's
//                          replay plan, all on the default stream) through the same loop: cold
//                          (ns_per_event, from an empty cache) and warm (warm_ns_per_event, a
//                          second pass on what the first left cached); allocator calls only.
//                          peak_reserved is the allocator's own figure over both passes, peak_live
//                          the trace's, ratio the one over the other.
//
//   memscope_gpu_peers [--traces FILE_OR_DIR]... [--allocators a,b,...] [--peer NAME=PATH.so]
//                      [--pairs N] [--reps N] [--budget SECONDS]
//   memscope_gpu_peers --plans --traces FILE_OR_DIR...   the plans' events and peak live, no GPU
//
// --budget (default 120) bounds the replays: each allocator gets an equal share of it, counted
// from the start, and leaves out the traces it would begin after its share is spent.
//
// Without a GPU it prints "no GPU: <reason>" and exits 77 (a skip, as ctest counts it). It is a
// benchmark, never a test: the figures depend on the machine.
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "gpu_peer.h"
#include "memscope/caching_allocator.hpp"
#include "memscope/config.hpp"
#include "memscope/cuda_backend.hpp"
#include "memscope/errors.hpp"
#include "memscope/replay.hpp"
#include "memscope/trace.hpp"
#include "memscope/units.hpp"

namespace {

constexpr int kSkipExit = 77;
using Clock = std::chrono::steady_clock;

// One allocator under test. peak_reserved() is -1 where the allocator keeps no such figure.
class Peer {
 public:
  explicit Peer(std::string name) : name_(std::move(name)) {}
  virtual ~Peer() = default;
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;
  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* ptr) noexcept = 0;
  [[nodiscard]] virtual std::int64_t peak_reserved() = 0;
  virtual void reset_peak() = 0;
  virtual void empty_cache() = 0;
  // Without a cache every call reaches the driver: measure a few pairs and one trace only.
  [[nodiscard]] virtual bool uncached() const { return false; }

 private:
  std::string name_;
};

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "gpu_peers: %s: %s\n", what, cudaGetErrorString(status));
    std::exit(1);  // NOLINT(concurrency-mt-unsafe): the program has one thread
  }
}

std::int64_t device_used() {
  std::size_t free = 0;
  std::size_t total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return static_cast<std::int64_t>(total - free);
}

class MemscopePeer final : public Peer {
 public:
  MemscopePeer(std::string name, const std::string& settings)
      : Peer(std::move(name)),
        allocator_(std::make_shared<memscope::CudaBackend>(0),
                   memscope::AllocatorConfig::parse(settings)) {}
  void* allocate(std::size_t bytes) override {
    try {
      return allocator_.allocate(bytes);
    } catch (const memscope::OutOfMemoryError&) {
      return nullptr;  // counted by the replay as a failed allocation, as for the others
    }
  }
  void deallocate(void* ptr) noexcept override { allocator_.deallocate(ptr); }
  std::int64_t peak_reserved() override {
    return allocator_.stats()
        .reserved_bytes[static_cast<std::size_t>(memscope::StatPool::all)]
        .peak;
  }
  void reset_peak() override { allocator_.reset_peak_stats(); }
  void empty_cache() override { (void)allocator_.empty_cache(); }
  std::size_t release_all() { return allocator_.empty_cache(); }

 private:
  memscope::CachingAllocator allocator_;
};

class MallocAsyncPeer final : public Peer {
 public:
  MallocAsyncPeer() : Peer("cudaMallocAsync") {
    check(cudaDeviceGetDefaultMemPool(&pool_, 0), "cudaDeviceGetDefaultMemPool");
    auto threshold = std::numeric_limits<std::uint64_t>::max();
    check(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &threshold),
          "cudaMemPoolSetAttribute(ReleaseThreshold)");
  }
  void* allocate(std::size_t bytes) override {
    void* p = nullptr;
    return cudaMallocAsync(&p, bytes, nullptr) == cudaSuccess ? p : nullptr;
  }
  void deallocate(void* ptr) noexcept override { (void)cudaFreeAsync(ptr, nullptr); }
  std::int64_t peak_reserved() override {
    std::uint64_t high = 0;
    check(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &high),
          "cudaMemPoolGetAttribute(ReservedMemHigh)");
    return static_cast<std::int64_t>(high);
  }
  void reset_peak() override {
    std::uint64_t zero = 0;  // the only value it accepts: resets the high mark to the current
    check(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &zero),
          "cudaMemPoolSetAttribute(ReservedMemHigh)");
  }
  void empty_cache() override {
    check(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");
    check(cudaMemPoolTrimTo(pool_, 0), "cudaMemPoolTrimTo");
  }

 private:
  cudaMemPool_t pool_ = nullptr;
};

class MallocPeer final : public Peer {
 public:
  MallocPeer() : Peer("cudaMalloc") {}
  void* allocate(std::size_t bytes) override {
    void* p = nullptr;
    return cudaMalloc(&p, bytes) == cudaSuccess ? p : nullptr;
  }
  void deallocate(void* ptr) noexcept override { (void)cudaFree(ptr); }
  std::int64_t peak_reserved() override { return -1; }
  void reset_peak() override {}
  void empty_cache() override {}
  bool uncached() const override { return true; }
};

// An allocator behind bench/gpu_peer.h in a shared object.
class PluginPeer final : public Peer {
 public:
  PluginPeer(std::string name, void* handle) : Peer(std::move(name)) {
    open_ = symbol<decltype(open_)>(handle, "memscope_peer_open");
    allocate_ = symbol<decltype(allocate_)>(handle, "memscope_peer_allocate");
    deallocate_ = symbol<decltype(deallocate_)>(handle, "memscope_peer_deallocate");
    peak_ = symbol<decltype(peak_)>(handle, "memscope_peer_peak_reserved");
    reset_ = symbol<decltype(reset_)>(handle, "memscope_peer_reset_peak");
    empty_ = symbol<decltype(empty_)>(handle, "memscope_peer_empty_cache");
  }
  [[nodiscard]] const char* open() const { return open_(); }
  void* allocate(std::size_t bytes) override { return allocate_(bytes); }
  void deallocate(void* ptr) noexcept override { deallocate_(ptr); }
  std::int64_t peak_reserved() override { return peak_(); }
  void reset_peak() override { reset_(); }
  void empty_cache() override { empty_(); }

 private:
  template <class Fn>
  static Fn symbol(void* handle, const char* name) {
    void* s = ::dlsym(handle, name);
    if (s == nullptr) throw std::runtime_error(std::string("plug-in lacks ") + name);
    return reinterpret_cast<Fn>(s);  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
  }
  const char* (*open_)() = nullptr;
  void* (*allocate_)(std::size_t) = nullptr;
  void (*deallocate_)(void*) = nullptr;
  long long (*peak_)() = nullptr;
  void (*reset_)() = nullptr;
  void (*empty_)() = nullptr;
};

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// ns per allocate+free pair of `bytes`, the best of `reps` runs of `pairs` after a warm-up pair.
double hit_pair_ns(Peer& peer, std::size_t bytes, long pairs, int reps) {
  peer.deallocate(peer.allocate(bytes));
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    for (long i = 0; i < pairs; ++i) peer.deallocate(peer.allocate(bytes));
    best = std::min(best, seconds_since(t0) * 1e9 / static_cast<double>(pairs));
  }
  return best;
}

struct Trace {
  std::string name;  // "cs336-small_ctx256_bs32_fwd_bwd.plan", as the 2026-12-04 run named it
  memscope::ReplayPlan plan;
};

// One pass of the plan; returns ns per op. Allocations still live at the end are freed after the
// clock stops. An allocation refused is counted in `failed` and its free skipped.
double replay_pass(Peer& peer, const memscope::ReplayPlan& plan, std::size_t& failed) {
  std::vector<void*> live(plan.allocations, nullptr);
  const auto t0 = Clock::now();
  for (const memscope::ReplayOp& op : plan.ops) {
    if (!op.is_free) {
      void* p = peer.allocate(op.size);
      if (p == nullptr && op.size != 0) ++failed;
      live[op.slot] = p;
    } else if (void* p = live[op.slot]; p != nullptr) {
      peer.deallocate(p);
      live[op.slot] = nullptr;
    }
  }
  const double ns = seconds_since(t0) * 1e9 / static_cast<double>(plan.ops.size());
  for (void* p : live) {
    if (p != nullptr) peer.deallocate(p);
  }
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  return ns;
}

void replay_row(Peer& peer, const Trace& trace) {
  peer.empty_cache();
  peer.reset_peak();
  const std::int64_t baseline = device_used();  // the context and other allocators' holdings
  std::size_t failed = 0;
  const double cold = replay_pass(peer, trace.plan, failed);
  std::printf(R"({"kind":"replay","allocator":"%s","plan":"%s","ops":%zu,"ns_per_event":%.1f)",
              peer.name().c_str(), trace.name.c_str(), trace.plan.ops.size(), cold);
  if (!peer.uncached()) {
    const double warm = replay_pass(peer, trace.plan, failed);
    const std::int64_t peak = peer.peak_reserved();
    std::printf(R"(,"warm_ns_per_event":%.1f)", warm);
    if (peak >= 0) {
      std::printf(R"(,"peak_reserved":%lld,"peak_live":%zu,"ratio":%.4f)",
                  static_cast<long long>(peak), trace.plan.peak_live,
                  static_cast<double>(peak) / static_cast<double>(trace.plan.peak_live));
    }
    // memscope's own account of what empty_cache() gives back, against the driver's.
    if (auto* ms = dynamic_cast<MemscopePeer*>(&peer)) {
      const std::int64_t before = device_used();
      const std::size_t released = ms->release_all();
      const std::int64_t after = device_used();
      std::printf(R"(,"device_used_before_empty":%lld,"empty_cache_released":%zu,)"
                  R"("device_used_drop_on_empty":%lld)",
                  static_cast<long long>(before - baseline), released,
                  static_cast<long long>(before - after));
    }
  }
  if (failed != 0) std::printf(R"(,"failed_allocations":%zu)", failed);
  std::printf("}\n");
  std::fflush(stdout);
  peer.empty_cache();
}

struct Options {
  std::vector<std::filesystem::path> traces;
  std::vector<std::string> allocators{"memscope",
                                      "memscope-expandable",
                                      "memscope-expandable-page-16MiB",
                                      "memscope-expandable-page-32MiB",
                                      "cudaMallocAsync",
                                      "cudaMalloc"};
  std::vector<std::pair<std::string, std::string>> plugins;  // name, path
  long pairs = 200000;
  int reps = 5;
  double budget_s = 120;
  bool plans_only = false;  // --plans: describe the traces' plans and stop (needs no GPU)
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "gpu_peers: %s\nusage: memscope_gpu_peers [--traces FILE_OR_DIR]... "
               "[--allocators a,b,...] [--peer NAME=PATH.so] [--pairs N] [--reps N] "
               "[--budget SECONDS]\n       memscope_gpu_peers --plans --traces FILE_OR_DIR...\n",
               why.c_str());
  std::exit(2);  // NOLINT(concurrency-mt-unsafe): the program has one thread
}

std::vector<std::string> split(std::string_view text) {
  std::vector<std::string> parts;
  while (!text.empty()) {
    const auto comma = text.find(',');
    if (comma != 0) parts.emplace_back(text.substr(0, comma));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return parts;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--plans") {
      o.plans_only = true;
      continue;
    }
    if (i + 1 >= argc) usage(std::string(arg) + " needs a value");
    const std::string value = argv[++i];
    try {
      if (arg == "--traces") {
        o.traces.emplace_back(value);
      } else if (arg == "--allocators") {
        o.allocators = split(value);
      } else if (arg == "--peer") {
        const auto eq = value.find('=');
        if (eq == std::string::npos || eq == 0) usage("--peer takes NAME=PATH, not " + value);
        o.plugins.emplace_back(value.substr(0, eq), value.substr(eq + 1));
      } else if (arg == "--pairs") {
        o.pairs = std::stol(value);
      } else if (arg == "--reps") {
        o.reps = std::stoi(value);
      } else if (arg == "--budget") {
        o.budget_s = std::stod(value);
      } else {
        usage("unknown option " + std::string(arg));
      }
    } catch (const std::logic_error&) {
      usage(std::string(arg) + " takes a number, not " + value);
    }
  }
  if (o.pairs <= 0 || o.reps <= 0) usage("--pairs and --reps must be positive");
  return o;
}

// The traces named, in the order given (files, or every trace file of a folder, by name; each
// file once), read through memscope's public
// trace API; one that cannot be read is reported and left out.
std::vector<Trace> load_traces(const std::vector<std::filesystem::path>& given) {
  std::vector<std::filesystem::path> files;
  for (const auto& path : given) {
    if (std::filesystem::is_directory(path)) {
      std::vector<std::filesystem::path> inside;
      for (const auto& entry : std::filesystem::directory_iterator(path)) {
        const auto ext = entry.path().extension();
        if (entry.is_regular_file() && (ext == ".pickle" || ext == ".json" || ext == ".csv")) {
          inside.push_back(entry.path());
        }
      }
      std::sort(inside.begin(), inside.end());
      files.insert(files.end(), inside.begin(), inside.end());
    } else {
      files.push_back(path);
    }
  }
  std::vector<Trace> traces;
  std::vector<std::filesystem::path> seen;  // a file named and also inside a folder named: once
  for (const auto& file : files) {
    std::error_code ignored;
    const auto canonical = std::filesystem::weakly_canonical(file, ignored);
    if (std::find(seen.begin(), seen.end(), canonical) != seen.end()) continue;
    seen.push_back(canonical);
    try {
      const memscope::TorchSnapshot snapshot = memscope::read_trace_file(file);
      const auto devices = memscope::trace_devices(snapshot);
      if (devices.empty()) throw std::runtime_error("no device has a trace");
      std::string name = file.stem().string();
      if (name.rfind("torch_snapshot_", 0) == 0) name.erase(0, 15);
      traces.push_back({name + ".plan", memscope::build_replay_plan(snapshot, devices.front())});
    } catch (const std::exception& e) {
      std::fprintf(stderr, "gpu_peers: %s left out: %s\n", file.string().c_str(), e.what());
    }
  }
  return traces;
}

std::unique_ptr<Peer> make_peer(const std::string& name, const Options& o) {
  if (name == "memscope") return std::make_unique<MemscopePeer>(name, "");
  if (name == "memscope-expandable") {
    return std::make_unique<MemscopePeer>(name, "expandable_segments:true");
  }
  // memscope-expandable-page-<size>: the large pool's page (expandable_segments_page_size):
  // one physical allocation and mapping per page, so the page sets the driver calls.
  if (constexpr std::string_view prefix = "memscope-expandable-page-"; name.starts_with(prefix)) {
    return std::make_unique<MemscopePeer>(
        name,
        "expandable_segments:true,expandable_segments_page_size:" + name.substr(prefix.size()));
  }
  if (name == "cudaMallocAsync") return std::make_unique<MallocAsyncPeer>();
  if (name == "cudaMalloc") return std::make_unique<MallocPeer>();
  for (const auto& [plugin, path] : o.plugins) {
    if (plugin != name) continue;
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      std::fprintf(stderr, "gpu_peers: %s skipped: %s\n", name.c_str(),
                   ::dlerror());  // NOLINT(concurrency-mt-unsafe)
      return nullptr;
    }
    auto peer = std::make_unique<PluginPeer>(name, handle);  // never dlclose'd: caches outlive us
    if (const char* why = peer->open(); why != nullptr) {
      std::fprintf(stderr, "gpu_peers: %s skipped: %s\n", name.c_str(), why);
      return nullptr;
    }
    return peer;
  }
  usage("unknown allocator " + name + " (no --peer " + name + "=PATH given)");
}

int run(const Options& o) {
  const auto started = Clock::now();
  if (o.plans_only) {
    for (const Trace& trace : load_traces(o.traces)) {
      std::printf(R"({"kind":"plan","plan":"%s","ops":%zu,"peak_live":%zu})"
                  "\n",
                  trace.name.c_str(), trace.plan.ops.size(), trace.plan.peak_live);
    }
    return 0;
  }
  // The driver first: its reason (no libcuda.so.1) says more than the runtime's.
  if (const auto driver = memscope::cuda_available(); !driver.available) {
    std::fprintf(stderr, "no GPU: %s\n", driver.reason.c_str());
    return kSkipExit;
  }
  int devices = 0;
  if (const cudaError_t status = cudaGetDeviceCount(&devices);
      status != cudaSuccess || devices == 0) {
    std::fprintf(
        stderr, "no GPU: %s\n",
        status != cudaSuccess ? cudaGetErrorString(status) : "the CUDA runtime sees no device");
    return kSkipExit;
  }
  check(cudaSetDevice(0), "cudaSetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  int driver = 0;
  int runtime = 0;
  check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  std::printf(R"({"device":"%s","driver":%d,"runtime":%d})"
              "\n",
              prop.name, driver, runtime);
  std::fflush(stdout);

  const std::vector<Trace> traces = load_traces(o.traces);
  constexpr std::size_t kPairSizes[] = {512, 64 * memscope::KiB, 2 * memscope::MiB,
                                        64 * memscope::MiB};
  // Each allocator has its share of the budget, so that a slow one cannot crowd out the rest.
  const double share =
      o.budget_s / static_cast<double>(std::max<std::size_t>(1, o.allocators.size()));
  for (std::size_t i = 0; i < o.allocators.size(); ++i) {
    const std::string& name = o.allocators[i];
    const double deadline = share * static_cast<double>(i + 1);
    const std::unique_ptr<Peer> peer = make_peer(name, o);
    if (!peer) continue;
    for (const std::size_t bytes : kPairSizes) {
      const long pairs = peer->uncached() ? std::min(o.pairs, 2000L) : o.pairs;
      const int reps = peer->uncached() ? std::min(o.reps, 3) : o.reps;
      std::printf(R"({"kind":"pair","allocator":"%s","bytes":%zu,"ns":%.1f})"
                  "\n",
                  peer->name().c_str(), bytes, hit_pair_ns(*peer, bytes, pairs, reps));
      std::fflush(stdout);
    }
    peer->empty_cache();
    for (const Trace& trace : traces) {
      if (seconds_since(started) > deadline) {
        std::fprintf(
            stderr,
            "gpu_peers: %s: its share of the %.0f s budget is spent; %s and later left out\n",
            name.c_str(), o.budget_s, trace.name.c_str());
        break;
      }
      replay_row(*peer, trace);
      if (peer->uncached()) break;  // one trace is enough to show the cost of no cache
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_peers: %s\n", e.what());
    return 1;
  }
}
