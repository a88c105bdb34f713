// Would it fit: the smallest simulated device a plan replays on without an out-of-memory
// error, and several settings replayed side by side.
#include <algorithm>
#include <atomic>
#include <exception>
#include <future>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "memscope/errors.hpp"
#include "memscope/trace.hpp"

namespace memscope {
namespace {

// A device no trace fills (1 EiB): the replay's own peak reserved there, with nothing refused.
constexpr std::size_t kUnlimited = std::size_t{1} << 60;

}  // namespace

FitResult fit_capacity(const ReplayPlan& plan, const FitOptions& options) {
  if (options.precision == 0) {
    throw UsageError("fit_capacity: precision is 0 bytes; pass a positive size such as 2MiB");
  }
  const std::size_t p = options.precision;
  FitResult fit;
  fit.config = options.config.to_string();
  fit.precision = p;
  fit.lower_bound = plan.peak_live;
  const auto fits = [&](std::size_t capacity) {
    ReplayOptions o;
    o.config = options.config;
    o.capacity = capacity;
    o.stop_at_first_oom = true;  // one refusal decides it: the rest need not run
    const bool ok = replay(plan, o).num_ooms == 0;
    fit.probes.emplace_back(capacity, ok);
    return ok;
  };

  std::size_t max_capacity = options.max_capacity;
  if (max_capacity == 0) {
    ReplayOptions o;
    o.config = options.config;
    o.capacity = kUnlimited;
    const ReplayResult unlimited = replay(plan, o);
    const auto reserved =
        static_cast<std::size_t>(std::max<std::int64_t>(unlimited.peak_reserved, 0));
    max_capacity = reserved > kUnlimited / 4 ? kUnlimited : 4 * reserved;
  }
  // Grid points k * p. Below the peak live bytes nothing fits (allocations are never smaller
  // than requested), so the last grid point under it is a known failure without a replay.
  std::size_t lo = plan.peak_live == 0 ? 0 : (plan.peak_live - 1) / p;
  std::size_t hi = std::max<std::size_t>(max_capacity / p + (max_capacity % p != 0 ? 1 : 0), 1);
  hi = std::max(hi, lo + 1);
  fit.max_capacity = hi * p;
  if (!fits(hi * p)) return fit;  // fits stays false: nothing up to max_capacity
  while (hi - lo > 1) {
    const std::size_t mid = lo + (hi - lo) / 2;
    (fits(mid * p) ? hi : lo) = mid;
  }
  fit.fits = true;
  fit.capacity = hi * p;
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
