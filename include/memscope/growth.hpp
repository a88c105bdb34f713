// Growth across iterations: is a training loop keeping memory it allocated in one step alive in
// every later step (a loss accumulated without .detach(), a list that keeps tensors, a traceback
// that holds frames), and which code allocated it.
//
// A trace is cut into iterations at boundaries: given (event indices: a Trainer step, a
// memscope.torch.step() call), read from the events' tags (a tag ending in "step N" or
// "iteration N" marks a new iteration where N changes), or detected from the repeating
// sequence of allocations (the period at which (size, stack) repeats best). The growth test:
// an allocation made in iteration k that is still live at the last boundary, while iterations
// k+1.. k+m went by, was retained. Retained allocations are grouped by allocation site (the
// blamed frame) and tag without its step ("train/step 3: forward" -> "train/forward": the
// category); a group grows when allocations of at least
// `min_iterations` different iterations are retained, which memory kept once (parameters,
// optimizer state made in the first step) never is.
//
// Thread safety: pure functions of plain values. Errors: TraceFormatError for a device without
// a trace or a boundary beyond its events (naming it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "memscope/replay.hpp"
#include "memscope/report.hpp"
#include "memscope/trace_events.hpp"

namespace memscope {

struct GrowthOptions {
  // Event indices at which a new iteration begins, increasing; empty: from tags, else detected.
  std::vector<std::size_t> boundaries;
  std::size_t min_iterations = 3;  // retained from this many iterations: growth established
  std::size_t top_sites = 10;
};

struct GrowthSite {
  ReplaySite site;                      // where (the blamed frame); bytes and count: retained
  std::string tag;                      // the category (the allocations' tag), empty when none
  std::size_t iterations = 0;           // iterations with retained allocations from this site
  std::size_t bytes_per_iteration = 0;  // retained bytes / iterations
  // "model.py:88 forward: +4.00 MiB per iteration over 10 iterations, 40.00 MiB held"
  [[nodiscard]] std::string text() const;
};

struct GrowthResult {
  std::int64_t device = 0;
  std::string boundaries_from;  // "given", "tags", "detected (a period of N allocations)", "none"
  std::vector<std::size_t> boundaries;  // event indices where iterations begin
  // Requested bytes live at each boundary (just before its event), then at the end.
  std::vector<std::size_t> live_at_boundary;
  std::size_t iterations = 0;      // complete iterations (between two boundaries)
  std::vector<GrowthSite> sites;   // growing sites, most retained bytes first (top_sites)
  std::size_t retained_bytes = 0;  // by the growing sites
  std::size_t min_iterations = 0;

  [[nodiscard]] bool growing() const noexcept { return !sites.empty(); }
  // One rendering: the verdict, live per boundary, the growing sites.
  [[nodiscard]] report::Report to_report(const std::string& title = {}) const;
  [[nodiscard]] std::string explain() const;
};

[[nodiscard]] GrowthResult analyze_growth(const TorchSnapshot& snapshot, std::int64_t device = 0,
                                          const GrowthOptions& options = {});

// The period, in allocations, at which the (size, stack) sequence of `keys` repeats best, or 0
// when no period of at least 2 repeats for at least `min_repeats` periods with 90 % of its
// allocations the same.
[[nodiscard]] std::size_t detect_period(const std::vector<std::uint64_t>& keys,
                                        std::size_t min_repeats = 3);

}  // namespace memscope
