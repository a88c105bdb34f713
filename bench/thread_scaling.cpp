// memscope_thread_scaling: how the hit path scales with threads sharing ONE allocator.
//
//   memscope_thread_scaling [--seconds S] [--repetitions R] [--json FILE] [--raise-priority]
//
// N threads (1, 2, 8) share one memscope::CachingAllocator (host backend and simulated backend)
// and each does allocate+free hit pairs at one size for S seconds, (a) each thread on a stream
// of its own, (b) all on the default stream, where they share the cached blocks. The figure is
// pairs per second of all threads together; the ratios 2T/1T and 8T/1T are computed within one
// repetition (1, 2 and 8 threads run back to back, so a change in the machine's load hits all
// three alike) and the median over repetitions is reported. glibc malloc is measured the same
// way as the peer. Two more subjects give the ceiling that exact global statistics impose on
// any allocator: a "pair" of relaxed fetch_add(+size), fetch_add(-size) on ONE shared
// std::atomic<int64_t> ("atomic-shared": the cache line bounces between the cores), and on one
// atomic per thread, each on its own cache line ("atomic-separate": what per-thread counters
// would cost).
//
// Every timed memscope pair is a hit: the allocator is warmed before timing (a block per thread
// on each stream, then one untimed pair in each thread, which also fills any per-thread front
// cache) and backend_reserves_while_timed (segments reserved while timing) is reported; it must
// read 0. Memory is never touched, as in the other hit-pair benchmarks. The host backend at
// 256 MiB warms 8 populated blocks (2 GiB resident while that row runs).
//
// The machine this runs on has 2 cores shared with other work: the ratios are the point (they
// are measured in the same run), not the absolute rates. Thread t runs on the t-th CPU the
// process may use (round robin), so 2 threads are on 2 cores from the first pair instead of
// waiting for the load balancer. Each row also says how many cores the threads got (CPU seconds
// per wall second): with Linux's autogroup scheduling every session gets an equal share of the
// CPUs whatever its nice value, so on a machine busy with other people's builds 2 threads may
// get half a core between them and the wall-time ratio says nothing about the allocator.
// --raise-priority (root, or CAP_SYS_NICE) therefore starts a session of its own (a new
// autogroup, which dies with the process) and gives it and the process nice -20, so the
// threads get the cores while it runs (others' jobs slow down for that minute); the JSON
// says whether it worked. docs/benchmarks.md, "Hot path", quotes the figures.
#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "peers.hpp"

namespace memscope::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::array<int, 3> kThreadCounts = {1, 2, 8};
constexpr std::array<std::size_t, 4> kSizes = {512, 4 * KiB, 16 * MiB, 256 * MiB};
constexpr int kMaxThreads = 8;
// Threads look at the stop flag once per this many pairs, so the flag costs nothing measurable
// and a thread overruns the stop by at most this many pairs.
constexpr long kPairsPerCheck = 16;
// A 1-thread run that got less CPU than this per wall second is run again, up to kRetries
// times: the machine was busy, and the ratios against it would read too high.
constexpr double kOneThreadCores = 0.9;
constexpr int kRetries = 3;

// What one thread does per pair: `pair(thread)` allocates and frees once (or its stand-in).
using PairFn = std::function<void(int thread)>;

double thread_cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

struct RunResult {
  double pairs_per_second = 0;
  // CPU seconds the threads got, per second of wall time: 2 threads that each had a core of
  // their own read 2; on a machine busy with other work they read less, and the ratio 2T/1T
  // cannot exceed what this says the machine gave.
  double cores_used = 0;
};

// The CPUs this process may run on, in order.
const std::vector<std::size_t>& allowed_cpus() {
  static const std::vector<std::size_t> cpus = [] {
    std::vector<std::size_t> list;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof(set), &set) == 0) {
      for (std::size_t c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &set)) list.push_back(c);
      }
    }
    return list;
  }();
  return cpus;
}

// Pins the calling thread to the (thread % n)-th allowed CPU; a failure leaves it unpinned.
void pin_to_cpu(int thread) {
  const std::vector<std::size_t>& cpus = allowed_cpus();
  if (cpus.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpus[static_cast<std::size_t>(thread) % cpus.size()], &set);
  (void)::sched_setaffinity(0, sizeof(set), &set);
}

// Runs `pair` on `threads` threads for `seconds` of wall time.
RunResult run_threads(int threads, double seconds, const PairFn& pair) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  std::vector<long> done(static_cast<std::size_t>(threads), 0);
  std::vector<double> cpu(static_cast<std::size_t>(threads), 0);
  std::vector<std::thread> workers;
  workers.reserve(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      pin_to_cpu(t);
      pair(t);  // untimed: fills any per-thread cache in front of the shared one
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      const double cpu_start = thread_cpu_seconds();
      long n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        for (long i = 0; i < kPairsPerCheck; ++i) pair(t);
        n += kPairsPerCheck;
      }
      done[static_cast<std::size_t>(t)] = n;
      cpu[static_cast<std::size_t>(t)] = thread_cpu_seconds() - cpu_start;
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  const auto start = Clock::now();
  go.store(true, std::memory_order_release);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop.store(true);
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  for (auto& w : workers) w.join();
  long total = 0;
  for (const long n : done) total += n;
  double cpu_total = 0;
  for (const double c : cpu) cpu_total += c;
  return RunResult{static_cast<double>(total) / elapsed, cpu_total / elapsed};
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

struct Row {
  std::string subject;  // memscope-host, memscope-sim, glibc, atomic-shared, atomic-separate
  std::string stream;   // own, same, or "" where streams do not apply
  std::size_t size = 0;
  std::array<double, kThreadCounts.size()> rate{};   // median pairs/s per thread count
  std::array<double, kThreadCounts.size()> ratio{};  // median over repetitions of rate / 1T rate
  std::array<double, kThreadCounts.size()> ratio_min{};
  std::array<double, kThreadCounts.size()> cores{};  // median cores_used per thread count
  // Median over repetitions of (pairs per CPU second at N threads) / (the same at 1 thread): what
  // sharing the allocator costs in CPU per pair (lock hand-offs, cache-line moves, futex calls),
  // which a machine too busy to give each thread a core hides from the wall-time ratio.
  std::array<double, kThreadCounts.size()> per_cpu{};
  std::int64_t backend_reserves_while_timed = 0;
  int one_thread_short = 0;  // repetitions whose 1-thread run got under kOneThreadCores
};

// Measures one subject: every repetition runs 1, 2 and 8 threads back to back.
Row measure(Row row, int repetitions, double seconds, const PairFn& pair) {
  std::array<std::vector<double>, kThreadCounts.size()> rates;
  std::array<std::vector<double>, kThreadCounts.size()> ratios;
  std::array<std::vector<double>, kThreadCounts.size()> cores;
  std::array<std::vector<double>, kThreadCounts.size()> per_cpu;
  for (int r = 0; r < repetitions; ++r) {
    double one = 0;
    double one_per_cpu = 0;
    for (std::size_t i = 0; i < kThreadCounts.size(); ++i) {
      RunResult run = run_threads(kThreadCounts[i], seconds, pair);
      // One thread never waits for another, so less than a whole core means the machine was
      // busy, and every ratio of this repetition would be inflated: run it again.
      for (int retry = 0; i == 0 && run.cores_used < kOneThreadCores && retry < kRetries; ++retry) {
        run = run_threads(1, seconds, pair);
      }
      if (i == 0 && run.cores_used < kOneThreadCores) ++row.one_thread_short;
      const double rate = run.pairs_per_second;
      const double rate_per_cpu = run.cores_used > 0 ? rate / run.cores_used : 0;
      if (i == 0) {
        one = rate;
        one_per_cpu = rate_per_cpu;
      }
      rates[i].push_back(rate);
      cores[i].push_back(run.cores_used);
      per_cpu[i].push_back(one_per_cpu > 0 ? rate_per_cpu / one_per_cpu : 0);
      ratios[i].push_back(rate / one);
    }
  }
  for (std::size_t i = 0; i < kThreadCounts.size(); ++i) {
    row.rate[i] = median(rates[i]);
    row.ratio[i] = median(ratios[i]);
    row.ratio_min[i] = *std::min_element(ratios[i].begin(), ratios[i].end());
    row.cores[i] = median(cores[i]);
    row.per_cpu[i] = median(per_cpu[i]);
  }
  return row;
}

Row measure_memscope(const BackendUnderTest& backend, bool own_stream, std::size_t size,
                     int repetitions, double seconds) {
  const auto allocator = make_allocator(backend.spec);
  const auto stream_of = [own_stream](int thread) {
    return own_stream ? static_cast<StreamId>(thread + 1) : kDefaultStream;
  };
  // Warm: as many blocks as threads can hold at once on each stream used, so no pair misses.
  std::vector<void*> blocks;
  blocks.reserve(kMaxThreads);
  for (int t = 0; t < kMaxThreads; ++t) blocks.push_back(allocator->allocate(size, stream_of(t)));
  for (void* p : blocks) allocator->deallocate(p);
  CachingAllocator& shared = *allocator;
  const PairFn pair = [&shared, size, stream_of](int thread) {
    void* p = shared.allocate(size, stream_of(thread));
    asm volatile("" : : "r"(p) : "memory");  // keep the pair from being optimised away
    shared.deallocate(p);
  };
  Row row{std::string("memscope-") + backend.label, own_stream ? "own" : "same", size};
  const std::int64_t reserves_before = backend_reserves(shared);
  row = measure(std::move(row), repetitions, seconds, pair);
  row.backend_reserves_while_timed = backend_reserves(shared) - reserves_before;
  return row;
}

Row measure_glibc(std::size_t size, int repetitions, double seconds) {
  const PeerAllocator peer = process_malloc("glibc");
  const PairFn pair = [&peer, size](int) {
    void* p = peer.allocate(size);
    asm volatile("" : : "r"(p) : "memory");
    peer.deallocate(p);
  };
  return measure(Row{"glibc", "", size}, repetitions, seconds, pair);
}

// One counter per cache line, so the separate counters never share one.
struct alignas(64) PaddedCounter {
  std::atomic<std::int64_t> value{0};
};

Row measure_atomics(bool shared_counter, int repetitions, double seconds) {
  constexpr std::int64_t kDelta = 4096;
  std::array<PaddedCounter, kMaxThreads> counters;
  const PairFn pair = [&counters, shared_counter](int thread) {
    auto& c = counters[shared_counter ? 0 : static_cast<std::size_t>(thread)].value;
    c.fetch_add(kDelta, std::memory_order_relaxed);
    c.fetch_add(-kDelta, std::memory_order_relaxed);
  };
  return measure(Row{shared_counter ? "atomic-shared" : "atomic-separate", "", 0}, repetitions,
                 seconds, pair);
}

void print_row(const Row& row) {
  std::printf(
      "%-16s %-5s %10zu %10.3g %10.3g %10.3g  %5.2f (min %4.2f)  %5.2f (min %4.2f)  "
      "%4.2f %4.2f %4.2f  %4.2f %4.2f  %lld  %d\n",
      row.subject.c_str(), row.stream.empty() ? "-" : row.stream.c_str(), row.size, row.rate[0],
      row.rate[1], row.rate[2], row.ratio[1], row.ratio_min[1], row.ratio[2], row.ratio_min[2],
      row.cores[0], row.cores[1], row.cores[2], row.per_cpu[1], row.per_cpu[2],
      static_cast<long long>(row.backend_reserves_while_timed), row.one_thread_short);
  std::fflush(stdout);
}

// The 1-minute load average, to say how busy the machine was around the measurement.
double load_average() {
  double load = -1;
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1) load = -1;
    std::fclose(f);
  }
  return load;
}

// --raise-priority: a session (hence an autogroup) of our own at nice -20, and nice -20 for the
// process; what was done, for the output. A process group leader cannot start a session, so it
// forks first and the parent only waits: *exit_as_parent is then the child's exit status.
std::string raise_priority(int* exit_as_parent) {
  if (::setsid() < 0) {
    const pid_t child = ::fork();
    if (child > 0) {
      int status = 0;
      ::waitpid(child, &status, 0);
      *exit_as_parent = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
      return {};
    }
    if (child < 0 || ::setsid() < 0) return "not raised (no session of its own)";
  }
  std::string done;
  if (std::FILE* f = std::fopen("/proc/self/autogroup", "w")) {
    const bool ok = std::fputs("-20", f) >= 0;
    done = std::fclose(f) == 0 && ok ? "autogroup nice -20" : "autogroup nice unchanged";
  } else {
    done = "no autogroup";
  }
  done += ::setpriority(PRIO_PROCESS, 0, -20) == 0 ? ", nice -20" : ", nice unchanged";
  return done;
}

bool write_json(const std::string& path, const std::vector<Row>& rows, int repetitions,
                double seconds, double load_before, double load_after,
                const std::string& priority) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return false;
  std::fprintf(f,
               "{\n  \"seconds_per_run\": %g,\n  \"repetitions\": %d,\n  \"threads\": [1, 2, 8],\n"
               "  \"hardware_threads\": %u,\n  \"load_average_before\": %.2f,\n"
               "  \"load_average_after\": %.2f,\n  \"priority\": \"%s\",\n  \"rows\": [\n",
               seconds, repetitions, std::thread::hardware_concurrency(), load_before, load_after,
               priority.c_str());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::fprintf(
        f,
        "    {\"subject\": \"%s\", \"stream\": \"%s\", \"size\": %zu, "
        "\"pairs_per_second\": {\"1\": %.0f, \"2\": %.0f, \"8\": %.0f}, "
        "\"ratio_2_1\": %.3f, \"ratio_2_1_min\": %.3f, \"ratio_8_1\": %.3f, "
        "\"ratio_8_1_min\": %.3f, \"cores_used\": {\"1\": %.2f, \"2\": %.2f, \"8\": %.2f}, "
        "\"per_cpu_2_1\": %.3f, \"per_cpu_8_1\": %.3f, \"backend_reserves_while_timed\": %lld, "
        "\"one_thread_short\": %d}%s\n",
        r.subject.c_str(), r.stream.c_str(), r.size, r.rate[0], r.rate[1], r.rate[2], r.ratio[1],
        r.ratio_min[1], r.ratio[2], r.ratio_min[2], r.cores[0], r.cores[1], r.cores[2],
        r.per_cpu[1], r.per_cpu[2], static_cast<long long>(r.backend_reserves_while_timed),
        r.one_thread_short, i + 1 < rows.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  return std::fclose(f) == 0;
}

int usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--seconds S (> 0)] [--repetitions R (>= 1)] [--json FILE] "
               "[--raise-priority]\n",
               argv0);
  return 2;
}

}  // namespace
}  // namespace memscope::bench

int main(int argc, char** argv) {
  using namespace memscope::bench;
  double seconds = 0.2;
  int repetitions = 3;
  std::string json;
  bool raise = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--raise-priority") {
      raise = true;
      continue;
    }
    if (i + 1 >= argc) return usage(argv[0]);
    if (arg == "--seconds") {
      seconds = std::strtod(argv[++i], nullptr);
    } else if (arg == "--repetitions") {
      repetitions = static_cast<int>(std::strtol(argv[++i], nullptr, 10));
    } else if (arg == "--json") {
      json = argv[++i];
    } else {
      return usage(argv[0]);
    }
  }
  if (!(seconds > 0) || repetitions < 1) return usage(argv[0]);
  std::string priority = "not asked (--raise-priority)";
  if (raise) {
    int exit_as_parent = -1;
    priority = raise_priority(&exit_as_parent);
    if (exit_as_parent >= 0) return exit_as_parent;
  }

  std::printf(
      "threads share one allocator; %g s per run, median of %d repetitions; %u hardware "
      "threads; priority: %s\n",
      seconds, repetitions, std::thread::hardware_concurrency(), priority.c_str());
  std::printf("%-16s %-5s %10s %10s %10s %10s  %-16s  %-16s  %-14s  %-9s  %s  %s\n", "subject",
              "strm", "bytes", "1T pairs/s", "2T pairs/s", "8T pairs/s", "2T/1T", "8T/1T",
              "cores 1T 2T 8T", "per-CPU 2T 8T", "reserves", "1T short");
  const double load_before = load_average();
  std::vector<Row> rows;
  const auto add = [&rows](Row row) {
    print_row(row);
    rows.push_back(std::move(row));
  };
  for (const std::size_t size : kSizes) {
    for (const BackendUnderTest& backend : kBackends) {
      add(measure_memscope(backend, true, size, repetitions, seconds));
      add(measure_memscope(backend, false, size, repetitions, seconds));
    }
    add(measure_glibc(size, repetitions, seconds));
  }
  add(measure_atomics(true, repetitions, seconds));
  add(measure_atomics(false, repetitions, seconds));
  if (!json.empty() &&
      !write_json(json, rows, repetitions, seconds, load_before, load_average(), priority)) {
    std::fprintf(stderr, "cannot write %s\n", json.c_str());
    return 1;
  }
  return 0;
}
