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
//   --replay-once SETTINGS: instead, each trace's first device replayed once through replay()
//   with those allocator settings ("" the defaults), and the operations counted: what the slow
//   path's instructions per op are measured on (valgrind --tool=callgrind
//   --toggle-collect='memscope::replay(*' ..., its Ir over the operations printed).
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
#include "static_packing.hpp"
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

struct DevicePlan {
  ReplayPlan plan;
  double recorded_ms = 0;  // from the device's first event to its last, as recorded; 0 unknown
};

// The replay plan of a trace's first device; none for a trace without devices.
std::optional<DevicePlan> first_device_plan(const std::filesystem::path& path) {
  const memscope::TorchSnapshot snapshot = memscope::read_trace_file(path);
  const std::vector<std::int64_t> devices = memscope::trace_devices(snapshot);
  if (devices.empty()) return std::nullopt;
  DevicePlan d{memscope::build_replay_plan(snapshot, devices.front()), 0};
  std::int64_t first = 0;
  std::int64_t last = 0;
  for (const memscope::TraceEvent& e :
       snapshot.device_traces[static_cast<std::size_t>(devices.front())]) {
    if (e.time_us <= 0) continue;
    first = first == 0 ? e.time_us : std::min(first, e.time_us);
    last = std::max(last, e.time_us);
  }
  d.recorded_ms = static_cast<double>(last - first) / 1000.0;
  return d;
}

// --replay-once: one replay() per trace, the operations replayed in all.
int replay_once(const std::vector<std::filesystem::path>& traces, const std::string& settings) {
  memscope::ReplayOptions options;
  options.config = memscope::AllocatorConfig::parse(settings);
  std::size_t operations = 0;
  for (const std::filesystem::path& path : traces) {
    const std::optional<DevicePlan> d = first_device_plan(path);
    if (!d) continue;
    const memscope::ReplayResult r = memscope::replay(d->plan, options);
    operations += d->plan.ops.size();
    fmt::print("{}: {} ops, peak reserved {}\n", path.stem().string(), d->plan.ops.size(),
               r.peak_reserved);
  }
  fmt::print("{} traces, {} operations\n", traces.size(), operations);
  return 0;
}

// The recorded step's duration, or "—" for a plan with none (the synthetic steps).
std::string step_ms(double ms) {
  return ms > 0 ? fmt::format("{:.0f}", ms) : "—";
}

// add_row(name, plan, recorded_ms) for every trace's first device, then for the synthetic
// three-stream steps (the corpus has one stream each: bench/multi_stream_plan.hpp); a trace that
// cannot be read gets a row saying why, `empty_cells` after it.
template <class AddRow>
void add_rows(const std::vector<std::filesystem::path>& traces, AddRow& add_row, std::string& table,
              const std::string& empty_cells) {
  for (const auto& path : traces) {
    try {
      const std::optional<DevicePlan> first = first_device_plan(path);
      if (first) add_row(short_name(path), first->plan, first->recorded_ms);
    } catch (const std::exception& e) {
      table += fmt::format("| {} | unreadable: {} |{}\n", short_name(path), e.what(), empty_cells);
    }
  }
  for (const std::uint64_t seed : {1U, 2U, 3U}) {
    add_row(fmt::format("synthetic 3-stream training step (seed {})", seed),
            memscope::bench::three_stream_training_step(seed), 0.0);
  }
}

// The at-capacity table (--capacity); `ok`: rows where memscope's default rules fit no larger
// than PyTorch's, `ok_expandable`: where its expandable segments fit no larger than PyTorch's.
std::string capacity_table(const std::vector<std::filesystem::path>& traces, int iterations,
                           int& ok, int& ok_expandable) {
  std::string table = fmt::format(
      "Smallest simulated device (GB, 10^9 bytes, on a 2 MiB grid) on which each trace replays "
      "without running out of memory: 1 iteration, and {0} back to back on the cache the earlier "
      "ones left. memscope: its default rules (fit_capacity); PyTorch: the model of its default "
      "rules with its at-capacity order (bench/torch_rules.hpp, TorchLimits). memscope ≤ PyTorch: "
      "in both columns. Then memscope with expandable_segments:true and the recycling policy "
      "at_limit ({0} iterations) and its default, above_peak, beside the model of PyTorch's "
      "expandable segments at capacity (bench/torch_expandable_capacity.hpp: free pages unmapped "
      "by release_cached_blocks, holes mapped first, 20 MiB large pages); expandable ≤ PyTorch: "
      "memscope's default policy in both columns.\n\n"
      "| trace | peak live | memscope, 1 | PyTorch, 1 | memscope, {0} | PyTorch, {0} | memscope ≤ "
      "PyTorch | expandable `at_limit`, {0} | expandable `above_peak`, 1 | PyTorch expandable, 1 | "
      "expandable `above_peak`, {0} | PyTorch expandable, {0} | expandable ≤ PyTorch expandable "
      "|\n"
      "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|\n",
      iterations);
  const auto at_limit_fit = [iterations](const ReplayPlan& plan) {
    memscope::FitOptions o;
    o.config = memscope::AllocatorConfig::parse(
        "expandable_segments:true,expandable_segments_recycling:at_limit");
    o.iterations = iterations;
    const memscope::FitResult f = memscope::fit_capacity(plan, o);
    return f.fits ? f.capacity : 0;
  };
  const auto le = [](std::size_t a, std::size_t b) { return a != 0 && (b == 0 || a <= b); };
  ok = 0;
  ok_expandable = 0;
  auto add_row = [&](const std::string& name, const ReplayPlan& plan, double /*recorded_ms*/) {
    const auto one = memscope::bench::fit_both(plan, 1);
    const auto many = memscope::bench::fit_both(plan, iterations);
    const auto one_x = memscope::bench::fit_both_expandable(plan, 1);
    const auto many_x = memscope::bench::fit_both_expandable(plan, iterations);
    const bool good = le(one.memscope, one.torch) && le(many.memscope, many.torch);
    const bool good_x = le(one_x.memscope, one_x.torch) && le(many_x.memscope, many_x.torch);
    ok += good ? 1 : 0;
    ok_expandable += good_x ? 1 : 0;
    table += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                         name, gb(plan.peak_live), gb(one.memscope), gb(one.torch),
                         gb(many.memscope), gb(many.torch), good ? "yes" : "**no**",
                         gb(at_limit_fit(plan)), gb(one_x.memscope), gb(one_x.torch),
                         gb(many_x.memscope), gb(many_x.torch), good_x ? "yes" : "**no**");
  };
  add_rows(traces, add_row, table, " | | | | | | | | | | | |");
  return table;
}

// PyTorch's expandable rules through `iterations` back to back, with the pages they map after
// the first iteration (none: without empty_cache() or an out-of-memory error they unmap
// nothing) and what mapping them would take on an H200 (cuMemCreate + cuMemMap + the
// cuMemSetAccess that covers it, counting_backend.hpp's prices).
Series torch_expandable_steady_state(const ReplayPlan& plan, int iterations) {
  memscope::bench::TorchExpandableReplayer model;
  Series s = memscope::bench::model_steady_state(plan, model, 1);
  const std::size_t first_pages = model.result().pages_mapped;
  if (iterations > 1) {
    const Series rest = memscope::bench::model_steady_state(plan, model, iterations - 1);
    s.ratios.insert(s.ratios.end(), rest.ratios.begin(), rest.ratios.end());
  }
  s.maps_per_1k = 1000.0 * static_cast<double>(model.result().map_calls) /
                  static_cast<double>(plan.ops.size() * static_cast<std::size_t>(iterations));
  s.steady_page_maps = static_cast<double>(model.result().pages_mapped - first_pages) /
                       static_cast<double>(std::max(iterations - 1, 1));
  memscope::bench::DriverCalls per_iteration;
  per_iteration.mem_create = per_iteration.mem_map = per_iteration.mappings_given_access =
      static_cast<std::uint64_t>(s.steady_page_maps);
  s.steady_driver_ms = memscope::bench::h200_driver_us(per_iteration) / 1000.0;
  return s;
}

// The table of every trace and the synthetic three-stream steps in the steady state.
std::string steady_state_table(const std::vector<std::filesystem::path>& traces, int iterations,
                               std::chrono::steady_clock::time_point start) {
  std::string table = fmt::format(
      "Each cell: peak reserved / peak live in iterations 1 / 2 / {} (worst of all {}); "
      "maps: map+unmap calls per 1,000 ops; driver ms: what the CUDA driver calls of one "
      "iteration after the first would take on an H200 (pages mapped, moved and unmapped, at "
      "the prices measured there: an estimate, bench/counting_backend.hpp), beside the step's "
      "duration as recorded (with the recorder's own overhead). Default ≤ PyTorch: memscope's "
      "default rules at or below PyTorch's in every iteration. Expandable goal: ≤ 1.003 in "
      "every iteration and iteration {} ≤ iteration 1 + 0.0005. Page bound: the lowest figure "
      "any allocator with ranges of 2 MiB pages per stream and pool can reach "
      "(bench/page_bound.hpp); where it is above 1.003 the goal is out of reach.\n\n"
      "| trace | ops | step ms | memscope default | PyTorch rules | default ≤ PyTorch | "
      "memscope expandable | maps | driver ms | `above_peak`: worst · driver ms | page bound | "
      "PyTorch expandable | maps | driver ms | expandable goal |\n"
      "|---|---:|---:|---|---|---|---|---:|---:|---|---:|---|---:|---:|---|\n",
      iterations, iterations, iterations);
  int default_ok = 0;
  int expandable_ok = 0;
  int above_peak_ok = 0;
  const auto add_row = [&](const std::string& name, const ReplayPlan& plan, double recorded_ms) {
    const Series ours = memscope::bench::memscope_steady_state(plan, "", iterations);
    memscope::bench::TorchRulesReplayer torch(memscope::bench::TieBreak::lowest_address);
    const Series theirs = memscope::bench::model_steady_state(plan, torch, iterations);
    const Series ours_x =
        memscope::bench::memscope_steady_state(plan, "expandable_segments:true", iterations);
    const Series above_peak = memscope::bench::memscope_steady_state(
        plan, "expandable_segments:true,expandable_segments_recycling:above_peak", iterations);
    const Series theirs_x = torch_expandable_steady_state(plan, iterations);
    const bool d_ok = never_above(ours, theirs);
    const bool x_ok = expandable_goal(ours_x);
    default_ok += d_ok ? 1 : 0;
    expandable_ok += x_ok ? 1 : 0;
    above_peak_ok += expandable_goal(above_peak) ? 1 : 0;
    const double bound = memscope::bench::page_bound(plan);
    const char* verdict = x_ok                          ? "met"
                          : bound > kExpandableGoal     ? "**missed** (out of reach)"
                          : expandable_goal(above_peak) ? "**missed** (`above_peak`: met)"
                                                        : "**missed**";
    table += fmt::format(
        "| {} | {} | {} | {} | {} | {} | {} | {:.2f} | {:.1f} | {:.4f} · {:.1f} | {:.4f} | {} | "
        "{:.2f} | {:.1f} | {} |\n",
        name, plan.ops.size(), step_ms(recorded_ms), figures(ours), figures(theirs),
        d_ok ? "yes" : "**no**", figures(ours_x), ours_x.maps_per_1k, ours_x.steady_driver_ms,
        *std::max_element(above_peak.ratios.begin(), above_peak.ratios.end()),
        above_peak.steady_driver_ms, bound, figures(theirs_x), theirs_x.maps_per_1k,
        theirs_x.steady_driver_ms, verdict);
  };
  add_rows(traces, add_row, table, " | | | | | | | | | | | | |");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  table += fmt::format(
      "\n{} traces from {} and 3 synthetic, {} iterations each, in {:.1f} s: default ≤ PyTorch "
      "on {}, expandable goal met on {} (`above_peak`: {}).\n",
      traces.size(), memscope::corpus::traces_dir().string(), iterations, seconds, default_ok,
      expandable_ok, above_peak_ok);
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
      "iteration {} (worst of all {}), map+unmap calls per 1,000 ops, and driver ms: what the "
      "CUDA driver calls of one iteration after the first would take on an H200 (an estimate "
      "from measured prices, as in the table above); step ms: the step's duration as recorded. "
      "* the goal met (≤ 1.003 in every iteration, iteration {} ≤ iteration 1 + 0.0005). "
      "No moves, known step: what a placement that never moves a page reaches when it knows the "
      "whole iteration in advance (the best of six offline packings, bench/static_packing.hpp; "
      "* ≤ 1.003; heuristics, not the optimum: above memscope's own `never` on one synthetic "
      "step).\n\n"
      "| trace | step ms | no moves, known step |",
      iterations, iterations, iterations);
  for (const char* policy : kPolicies) {
    table += fmt::format(" `{}` | maps | driver ms |", policy);
  }
  table += "\n|---|---:|---:|";
  for (std::size_t i = 0; i < kPolicies.size(); ++i) table += "---|---:|---:|";
  table += "\n";
  std::array<int, kPolicies.size()> met{};
  int packed_met = 0;
  const auto add_row = [&](const std::string& name, const ReplayPlan& plan, double recorded_ms) {
    const double packed = memscope::bench::static_packing(plan);
    packed_met += packed <= kExpandableGoal ? 1 : 0;
    table += fmt::format("| {} | {} | {:.4f}{} |", name, step_ms(recorded_ms), packed,
                         packed <= kExpandableGoal ? " *" : "");
    for (std::size_t i = 0; i < kPolicies.size(); ++i) {
      const Series x = memscope::bench::memscope_steady_state(
          plan,
          fmt::format("expandable_segments:true,expandable_segments_recycling:{}", kPolicies[i]),
          iterations);
      const bool ok = expandable_goal(x);
      met[i] += ok ? 1 : 0;
      table += fmt::format(" {:.4f} -> {:.4f} ({:.4f}){} | {:.2f} | {:.1f} |", x.ratios.front(),
                           x.ratios.back(), *std::max_element(x.ratios.begin(), x.ratios.end()),
                           ok ? " *" : "", x.maps_per_1k, x.steady_driver_ms);
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
  return table + fmt::format("; no moves with the step known: {}.\n", packed_met);
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
  std::optional<std::string> once;
  std::vector<std::filesystem::path> traces;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--iterations" && i + 1 < argc) {
      iterations = std::max(2, std::atoi(argv[++i]));
    } else if (arg == "--capacity") {
      capacity = true;
    } else if (arg == "--policies") {
      policies = true;
    } else if (arg == "--replay-once" && i + 1 < argc) {
      once = argv[++i];
    } else if (arg == "--doc" && i + 1 < argc) {
      doc = argv[++i];
    } else if (arg == "--help" || arg == "-h") {
      fmt::print(
          "usage: {} [--iterations N] [--capacity | --policies | --replay-once SETTINGS] [--doc "
          "FILE] [trace...]\n",
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
  if (once) return replay_once(traces, *once);
  const auto start = std::chrono::steady_clock::now();
  if (policies) return print_table(policies_table(traces, iterations, start), doc, "policy-table");
  if (!capacity)
    return print_table(steady_state_table(traces, iterations, start), doc, "corpus-table");
  int ok = 0;
  int ok_expandable = 0;
  std::string table = capacity_table(traces, iterations, ok, ok_expandable);
  table += fmt::format(
      "\n{} traces from {} and 3 synthetic, in {:.1f} s: memscope ≤ PyTorch on {}, expandable ≤ "
      "PyTorch expandable on {}.\n",
      traces.size(), memscope::corpus::traces_dir().string(),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), ok,
      ok_expandable);
  return print_table(table, doc, "capacity-table");
}
