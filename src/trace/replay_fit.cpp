// Would it fit: the smallest simulated device a plan replays on without an out-of-memory
// error, and several settings replayed side by side.
#include <algorithm>
#include <atomic>
#include <exception>
#include <future>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "memscope/errors.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/trace.hpp"

namespace memscope {
namespace {

// A device no trace fills (1 EiB): the replay's own peak reserved there, with nothing refused.
constexpr std::size_t kUnlimited = std::size_t{1} << 60;

}  // namespace

FitResult fit_by_bisection(std::size_t lower_bound, std::size_t max_capacity, std::size_t precision,
                           const std::function<bool(std::size_t)>& fits) {
  if (precision == 0) {
    throw UsageError("fit_capacity: precision is 0 bytes; pass a positive size such as 2MiB");
  }
  const std::size_t p = precision;
  FitResult fit;
  fit.precision = p;
  fit.lower_bound = lower_bound;
  const auto probe = [&](std::size_t capacity) {
    const bool ok = fits(capacity);
    fit.probes.emplace_back(capacity, ok);
    return ok;
  };
  // Grid points k * p. Below the lower bound nothing fits (allocations are never smaller than
  // requested), so the last grid point under it is a known failure without a replay.
  std::size_t lo = lower_bound == 0 ? 0 : (lower_bound - 1) / p;
  std::size_t hi = std::max<std::size_t>(max_capacity / p + (max_capacity % p != 0 ? 1 : 0), 1);
  hi = std::max(hi, lo + 1);
  fit.max_capacity = hi * p;
  if (!probe(hi * p)) return fit;  // fits stays false: nothing up to max_capacity
  while (hi - lo > 1) {
    const std::size_t mid = lo + (hi - lo) / 2;
    (probe(mid * p) ? hi : lo) = mid;
  }
  fit.fits = true;
  fit.capacity = hi * p;
  return fit;
}

namespace {

// Whether `plan`, replayed `iterations` times back to back through one allocator on a simulated
// device of `capacity` bytes, never runs out of memory.
bool fits_iterations(const ReplayPlan& plan, const AllocatorConfig& config, std::size_t capacity,
                     int iterations) {
  if (iterations <= 1) {
    ReplayOptions o;
    o.config = config;
    o.capacity = capacity;
    o.stop_at_first_oom = true;  // one refusal decides it: the rest need not run
    return replay(plan, o).num_ooms == 0;
  }
  CachingAllocator allocator(std::make_shared<SimulatedBackend>(capacity), config);
  for (int i = 0; i < iterations; ++i) {
    const ReplayResult r = replay(plan, allocator);
    for (void* ptr : r.live_pointers) allocator.deallocate(ptr);
    if (r.num_ooms != 0) return false;
  }
  return true;
}

}  // namespace

FitResult fit_capacity(const ReplayPlan& plan, const FitOptions& options) {
  if (options.precision == 0) {
    throw UsageError("fit_capacity: precision is 0 bytes; pass a positive size such as 2MiB");
  }
  std::size_t max_capacity = options.max_capacity;
  if (max_capacity == 0) {
    // Unlimited, the later iterations reserve no more than the first's peak and what the
    // cache it left holds; four times the first's peak covers them with room to spare.
    ReplayOptions o;
    o.config = options.config;
    o.capacity = kUnlimited;
    const ReplayResult unlimited = replay(plan, o);
    const auto reserved =
        static_cast<std::size_t>(std::max<std::int64_t>(unlimited.peak_reserved, 0));
    max_capacity = reserved > kUnlimited / 4 ? kUnlimited : 4 * reserved;
  }
  FitResult fit = fit_by_bisection(
      plan.peak_live, max_capacity, options.precision,
      [&](std::size_t c) { return fits_iterations(plan, options.config, c, options.iterations); });
  fit.config = options.config.to_string();
  return fit;
}

Comparison compare_settings(const TorchSnapshot& snapshot, const std::vector<std::string>& configs,
                            const CompareOptions& options) {
  const ReplayPlan plan = build_replay_plan(snapshot, options.device);
  std::vector<AllocatorConfig> parsed;  // every string checked before any replay starts
  parsed.reserve(configs.size());
  for (const std::string& text : configs) parsed.push_back(AllocatorConfig::parse(text));
  Comparison out;
  out.rows.resize(configs.size());
  const auto run_row = [&](std::size_t i) {
    ReplayOptions o;
    o.config = parsed[i];
    o.capacity = options.capacity;
    o.top_sites = options.top_sites;
    ComparisonRow& row = out.rows[i];
    row.replay = replay(plan, o);
    explain_with_trace(snapshot, plan, row.replay, options.top_sites);
    row.replay.config = configs[i];  // as the user wrote it
    if (options.fit) {
      row.fit = fit_capacity(plan, {o.config, options.fit_precision, 0});
      row.fit->config = configs[i];
    }
  };
  // The rows are independent (each its own allocator and device; the plan and the snapshot are
  // only read), so they run side by side on the machine's cores; results do not depend on it.
  const std::size_t workers = std::min<std::size_t>(
      configs.size(), std::max<std::size_t>(1, std::thread::hardware_concurrency()));
  std::atomic<std::size_t> next{0};
  std::vector<std::future<void>> running;
  for (std::size_t w = 0; w < workers; ++w) {
    running.push_back(std::async(std::launch::async, [&] {
      for (std::size_t i = next++; i < configs.size(); i = next++) run_row(i);
    }));
  }
  std::exception_ptr failure;
  for (std::future<void>& f : running) {
    try {
      f.get();
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  return out;
}

}  // namespace memscope
