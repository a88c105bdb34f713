// memscope_corpus_bench: every trace of the corpus (MEMSCOPE_TRACES; tests/support/
// trace_corpus.hpp) replayed N iterations back to back, each iteration on the cache the earlier
// ones left (what a training loop that runs the same step thousands of times sees), through
//   - memscope's default rules and PyTorch's default rules (bench/torch_rules.hpp), and
//   - memscope with expandable_segments:true (its default policy) and PyTorch's expandable
//     rules (bench/torch_expandable_rules.hpp),
// on a simulated device large enough that nothing runs out. Figures are peak reserved / peak live
// per iteration; map+unmap calls per 1,000 replayed ops beside the expandable ones (memscope:
// page map and unmap calls, num_device_alloc + num_device_free; PyTorch's model: its map_block
// calls, it never unmaps).
//
// Between iterations what a step left live is freed (and allocated again by the next iteration's
// starting set), in both memscope and the models.
//
// Usage: memscope_corpus_bench [--iterations N] [--capacity | --policies] [--doc
// docs/benchmarks.md]
//                             [trace...]
//   --doc FILE: replace the text between "<!-- corpus-table:begin -->" and
//   "<!-- corpus-table:end -->" in FILE with the table (make bench does).
//   --capacity: instead, at capacity: the smallest simulated device on which each
//   trace replays without running out of memory, memscope's default rules against PyTorch's
//   (bench/capacity_fit.hpp), for 1 iteration and for N back to back, on a 2 MiB grid; with
//   --doc, into the "capacity-table" section.
//   --policies: instead, memscope with expandable segments under each page-recycling policy
//   (never, at_limit, above_peak, always), 10 iterations; with --doc, into "policy-table".
#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "capacity_fit.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/config.hpp"
#include "memscope/errors.hpp"
#include "memscope/replay.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/trace.hpp"
#include "memscope/units.hpp"
#include "multi_stream_plan.hpp"
#include "page_bound.hpp"
#include "steady_state.hpp"
#include "torch_expandable_rules.hpp"
#include "torch_rules.hpp"
#include "trace_corpus.hpp"

namespace {

using memscope::ReplayPlan;

using Series = memscope::bench::SteadyState;

std::string figures(const Series& s) {
  const double worst = *std::max_element(s.ratios.begin(), s.ratios.end());
  return fmt::format("{:.4f} / {:.4f} / {:.4f} ({:.4f})", s.ratios.front(), s.ratios.at(1),
                     s.ratios.back(), worst);
}

// Whether `ours` stays at or below `theirs` in every iteration (to the fourth decimal shown).
bool never_above(const Series& ours, const Series& theirs) {
  for (std::size_t i = 0; i < ours.ratios.size(); ++i) {
    if (ours.ratios[i] > theirs.ratios[i] + 0.00005) return false;
  }
  return true;
}

constexpr double kExpandableGoal = 1.003;  // peak reserved / peak live in every iteration

bool expandable_goal(const Series& s) {
  const double worst = *std::max_element(s.ratios.begin(), s.ratios.end());
  return worst <= kExpandableGoal && s.ratios.back() <= s.ratios.front() + 0.0005;
}

std::string short_name(const std::filesystem::path& p) {
  std::string name = p.stem().string();
  const std::string prefix = "torch_snapshot_";
  if (name.rfind(prefix, 0) == 0) name.erase(0, prefix.size());
  return name;
}

void replace_section(const std::string& doc, const std::string& table, const std::string& section) {
  std::ifstream in(doc);
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  const std::string begin = "<!-- " + section + ":begin -->";
  const std::string end = "<!-- " + section + ":end -->";
  const auto b = text.find(begin);
  const auto e = text.find(end);
  if (!in || b == std::string::npos || e == std::string::npos || e < b) {
    throw memscope::UsageError("memscope_corpus_bench: " + doc + " has no '" + begin + "' ... '" +
                               end + "' section to replace");
  }
  text.replace(b + begin.size(), e - b - begin.size(), "\n" + table);
  std::ofstream(doc) << text;
}

std::string gb(std::size_t bytes) {
  return bytes == 0 ? std::string("none") : fmt::format("{:.2f}", static_cast<double>(bytes) / 1e9);
}

// The replay plan of a trace's first device; none for a trace without devices.
std::optional<ReplayPlan> first_device_plan(const std::filesystem::path& path) {
  const memscope::TorchSnapshot snapshot = memscope::read_trace_file(path);
  const std::vector<std::int64_t> devices = memscope::trace_devices(snapshot);
  if (devices.empty()) return std::nullopt;
  return memscope::build_replay_plan(snapshot, devices.front());
}

// The at-capacity table (--capacity).
std::string capacity_table(const std::vector<std::filesystem::path>& traces, int iterations,
                           int& ok) {
  std::string table = fmt::format(
      "Smallest simulated device (GB, 10^9 bytes, on a 2 MiB grid) on which each trace replays "
      "without running out of memory: 1 iteration, and {} back to back on the cache the earlier "
      "ones left. memscope: its default rules (fit_capacity); PyTorch: the model of its default "
      "rules with its at-capacity order (bench/torch_rules.hpp, TorchLimits). memscope ≤ PyTorch: "
      "in both columns.\n\n"
      "| trace | peak live | memscope, 1 | PyTorch, 1 | memscope, {} | PyTorch, {} | memscope ≤ "
      "PyTorch |\n|---|---:|---:|---:|---:|---:|---|\n",
      iterations, iterations, iterations);
  ok = 0;
  for (const auto& path : traces) {
    try {
      const std::optional<ReplayPlan> first = first_device_plan(path);
      if (!first) continue;
      const ReplayPlan& plan = *first;
      const auto one = memscope::bench::fit_both(plan, 1);
      const auto many = memscope::bench::fit_both(plan, iterations);
      const auto le = [](std::size_t a, std::size_t b) { return a != 0 && (b == 0 || a <= b); };
      const bool good = le(one.memscope, one.torch) && le(many.memscope, many.torch);
      ok += good ? 1 : 0;
      table += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", short_name(path),
                           gb(plan.peak_live), gb(one.memscope), gb(one.torch), gb(many.memscope),
                           gb(many.torch), good ? "yes" : "**no**");
    } catch (const std::exception& e) {
      table += fmt::format("| {} | unreadable: {} | | | | | |\n", short_name(path), e.what());
    }
  }
  return table;
}

// add_row(name, plan) for every trace's first device, then for the synthetic three-stream
// steps (the corpus has one stream each: bench/multi_stream_plan.hpp); a trace that cannot be
// read gets a row saying why, `empty_cells` after it.
template <class AddRow>
void add_rows(const std::vector<std::filesystem::path>& traces, AddRow& add_row, std::string& table,
              const std::string& empty_cells) {
  for (const auto& path : traces) {
    try {
      const std::optional<ReplayPlan> first = first_device_plan(path);
      if (first) add_row(short_name(path), *first);
    } catch (const std::exception& e) {
      table += fmt::format("| {} | unreadable: {} |{}\n", short_name(path), e.what(), empty_cells);
    }
  }
  for (const std::uint64_t seed : {1U, 2U, 3U}) {
    add_row(fmt::format("synthetic 3-stream training step (seed {})", seed),
            memscope::bench::three_stream_training_step(seed));
  }
}

// The table of every trace and the synthetic three-stream steps in the steady state.
std::string steady_state_table(const std::vector<std::filesystem::path>& traces, int iterations,
                               std::chrono::steady_clock::time_point start) {
  std::string table = fmt::format(
      "Each cell: peak reserved / peak live in iterations 1 / 2 / {} (worst of all {}); "
      "maps: map+unmap calls per 1,000 ops. Default ≤ PyTorch: memscope's default rules at or "
      "below PyTorch's in every iteration. Expandable goal: ≤ 1.003 in every iteration and "
      "iteration {} ≤ iteration 1 + 0.0005. Page bound: the lowest figure any allocator with "
      "ranges of 2 MiB pages per stream and pool can reach (bench/page_bound.hpp); where it is "
      "above 1.003 the goal is out of reach.\n\n"
      "| trace | ops | memscope default | PyTorch rules | default ≤ PyTorch | memscope "
      "expandable | maps | page bound | PyTorch expandable | maps | expandable goal |\n"
      "|---|---:|---|---|---|---|---:|---:|---|---:|---|\n",
      iterations, iterations, iterations);
  int default_ok = 0;
  int expandable_ok = 0;
  const auto add_row = [&](const std::string& name, const ReplayPlan& plan) {
    const Series ours = memscope::bench::memscope_steady_state(plan, "", iterations);
    memscope::bench::TorchRulesReplayer torch(memscope::bench::TieBreak::lowest_address);
    const Series theirs = memscope::bench::model_steady_state(plan, torch, iterations);
    const Series ours_x =
        memscope::bench::memscope_steady_state(plan, "expandable_segments:true", iterations);
    memscope::bench::TorchExpandableReplayer torch_x;
    Series theirs_x = memscope::bench::model_steady_state(plan, torch_x, iterations);
    theirs_x.maps_per_1k =
        1000.0 * static_cast<double>(torch_x.result().map_calls) /
        static_cast<double>(plan.ops.size() * static_cast<std::size_t>(iterations));
    const bool d_ok = never_above(ours, theirs);
    const bool x_ok = expandable_goal(ours_x);
    default_ok += d_ok ? 1 : 0;
    expandable_ok += x_ok ? 1 : 0;
    const double bound = memscope::bench::page_bound(plan);
    const char* verdict = x_ok                      ? "met"
                          : bound > kExpandableGoal ? "**missed** (out of reach)"
                                                    : "**missed**";
    table += fmt::format("| {} | {} | {} | {} | {} | {} | {:.2f} | {:.4f} | {} | {:.2f} | {} |\n",
                         name, plan.ops.size(), figures(ours), figures(theirs),
                         d_ok ? "yes" : "**no**", figures(ours_x), ours_x.maps_per_1k, bound,
                         figures(theirs_x), theirs_x.maps_per_1k, verdict);
  };
  add_rows(traces, add_row, table, " | | | | | | | | |");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  table += fmt::format(
      "\n{} traces from {} and 3 synthetic, {} iterations each, in {:.1f} s: default ≤ PyTorch "
      "on {}, expandable goal met on {}.\n",
      traces.size(), memscope::corpus::traces_dir().string(), iterations, seconds, default_ok,
      expandable_ok);
  return table;
}

// The table of every trace and the synthetic three-stream steps under each page-recycling
// policy of expandable segments (--policies): iteration 1 -> iteration N (worst), and map+unmap
// calls per 1,000 ops; the goal as in the steady-state table.
std::string policies_table(const std::vector<std::filesystem::path>& traces, int iterations,
                           std::chrono::steady_clock::time_point start) {
  constexpr std::array<const char*, 4> kPolicies{"never", "at_limit", "above_peak", "always"};
  std::string table = fmt::format(
      "Each cell: memscope with expandable_segments:true and that "
      "expandable_segments_recycling policy, peak reserved / peak live in iteration 1 -> "
      "iteration {} (worst of all {}), map+unmap calls per 1,000 ops; * the goal met (≤ 1.003 "
      "in every iteration, iteration {} ≤ iteration 1 + 0.0005).\n\n| trace |",
      iterations, iterations, iterations);
  for (const char* policy : kPolicies) table += fmt::format(" `{}` | maps |", policy);
  table += "\n|---|";
  for (std::size_t i = 0; i < kPolicies.size(); ++i) table += "---|---:|";
  table += "\n";
  std::array<int, kPolicies.size()> met{};
  const auto add_row = [&](const std::string& name, const ReplayPlan& plan) {
    table += fmt::format("| {} |", name);
    for (std::size_t i = 0; i < kPolicies.size(); ++i) {
      const Series x = memscope::bench::memscope_steady_state(
          plan,
          fmt::format("expandable_segments:true,expandable_segments_recycling:{}", kPolicies[i]),
          iterations);
      const bool ok = expandable_goal(x);
      met[i] += ok ? 1 : 0;
      table += fmt::format(" {:.4f} -> {:.4f} ({:.4f}){} | {:.2f} |", x.ratios.front(),
                           x.ratios.back(), *std::max_element(x.ratios.begin(), x.ratios.end()),
                           ok ? " *" : "", x.maps_per_1k);
    }
    table += "\n";
  };
  add_rows(traces, add_row, table, "");
  table +=
      fmt::format("\n{} traces from {} and 3 synthetic, {} iterations each, in {:.1f} s; goal met:",
                  traces.size(), memscope::corpus::traces_dir().string(), iterations,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  for (std::size_t i = 0; i < kPolicies.size(); ++i) {
    table += fmt::format("{} `{}` {}", i == 0 ? "" : ",", kPolicies[i], met[i]);
  }
  return table + ".\n";
}

// Prints `table`, and writes it into `doc`'s `section` when a doc is named; the exit status.
int print_table(const std::string& table, const std::string& doc, const std::string& section) {
  fmt::print("{}", table);
  if (doc.empty()) return 0;
  try {
    replace_section(doc, table, section);
    fmt::print("table written into {}\n", doc);
  } catch (const memscope::Error& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 10;
  std::string doc;
  bool capacity = false;
  bool policies = false;
  std::vector<std::filesystem::path> traces;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--iterations" && i + 1 < argc) {
      iterations = std::max(2, std::atoi(argv[++i]));
    } else if (arg == "--capacity") {
      capacity = true;
    } else if (arg == "--policies") {
      policies = true;
    } else if (arg == "--doc" && i + 1 < argc) {
      doc = argv[++i];
    } else if (arg == "--help" || arg == "-h") {
      fmt::print("usage: {} [--iterations N] [--capacity | --policies] [--doc FILE] [trace...]\n",
                 argv[0]);
      return 0;
    } else {
      traces.emplace_back(arg);
    }
  }
  if (traces.empty()) traces = memscope::corpus::all_traces();
  if (traces.empty()) {
    fmt::print("skipped: no traces in {} (the corpus of real traces; set MEMSCOPE_TRACES)\n",
               memscope::corpus::traces_dir().string());
    return 0;
  }
  const auto start = std::chrono::steady_clock::now();
  if (policies) return print_table(policies_table(traces, iterations, start), doc, "policy-table");
  if (!capacity)
    return print_table(steady_state_table(traces, iterations, start), doc, "corpus-table");
  int ok = 0;
  std::string table = capacity_table(traces, iterations, ok);
  table += fmt::format(
      "\n{} traces from {}, in {:.1f} s: memscope ≤ PyTorch on {}.\n", traces.size(),
      memscope::corpus::traces_dir().string(),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), ok);
  return print_table(table, doc, "capacity-table");
}
