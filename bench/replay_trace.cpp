// memscope_replay_bench: fragmentation and speed of memscope's allocator on a real PyTorch trace.
//
// Replays the corpus's small train step (its README) through memscope with several
// settings, through a model of PyTorch's own default placement (bench/torch_rules.hpp) with
// both tie rules, so the one rule where memscope differs (equal sizes: most recently cached first,
// not lowest address) is measured in the same run, and through a model of PyTorch's
// expandable_segments:True (bench/torch_expandable_rules.hpp), next to memscope's expandable
// segments with each page recycling policy and page size. Prints a Markdown table.
//
//   memscope_replay_bench [snapshot.pickle] [--repeat N]
//
// ns/event is the median over N replays (default 51) of the allocate/deallocate calls alone.
// map+unmap per 1k events: memscope's (num_device_alloc + num_device_free) * 1000 / operations
// (segment allocs and frees, or with expandable segments page map and unmap calls, a move counting
// one of each); the models' own device calls (segments created; map_block calls).
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "memscope/errors.hpp"
#include "memscope/trace.hpp"
#include "memscope/units.hpp"
#include "torch_expandable_rules.hpp"
#include "torch_rules.hpp"
#include "trace_corpus.hpp"

namespace {

using memscope::ReplayPlan;

using memscope::format_count;

struct Row {
  std::string config;
  std::uint64_t peak_reserved = 0;
  std::uint64_t peak_live = 0;
  std::string segments;
  std::string device_frees;
  std::string ooms;
  std::string map_per_1k;  // device map + unmap calls (or segment allocs + frees) per 1,000 ops
  std::string ns_per_event;
};

std::string per_1k(std::uint64_t calls, std::size_t operations) {
  return fmt::format("{:.2f}", static_cast<double>(calls) * 1000.0 /
                                   static_cast<double>(std::max<std::size_t>(operations, 1)));
}

// The median resists the odd slow run (another process, a page fault) better than the mean.
template <class F>
double median(int repeat, F&& run_once) {
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(repeat));
  for (int i = 0; i < repeat; ++i) samples.push_back(run_once());
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

// A setting this build's allocator refuses (an error) gives a row that says so, not a failed run.
// `label` names the row (the settings themselves when empty).
Row memscope_row(const ReplayPlan& plan, const std::string& settings, int repeat,
                 const std::string& label = "") {
  const std::string name =
      !label.empty()
          ? label
          : fmt::format("memscope {}", settings.empty() ? std::string("default") : settings);
  try {
    memscope::ReplayOptions options;
    options.config = memscope::AllocatorConfig::parse(settings);
    const memscope::ReplayResult r = memscope::replay(plan, options);
    const double ns = median(repeat, [&] { return memscope::replay(plan, options).ns_per_event; });
    return {
        name,
        static_cast<std::uint64_t>(r.peak_reserved),
        static_cast<std::uint64_t>(r.peak_requested),
        std::to_string(r.peak_segments),
        std::to_string(r.num_device_free),
        std::to_string(r.num_ooms),
        per_1k(static_cast<std::uint64_t>(r.num_device_alloc + r.num_device_free), r.operations),
        fmt::format("{:.0f}", ns)};
  } catch (const memscope::Error& e) {
    fmt::print(stderr, "{}: {}\n", name, e.what());
    return {name, 0, plan.peak_live, "error", "-", "-", "-", "-"};
  }
}

// A model's replay of the plan: the median nanoseconds per op over `repeat` runs.
template <class F>
double model_ns_per_op(const ReplayPlan& plan, int repeat, F&& replay_once) {
  return median(repeat, [&] {
    const auto start = std::chrono::steady_clock::now();
    replay_once();
    const std::chrono::duration<double, std::nano> elapsed =
        std::chrono::steady_clock::now() - start;
    return elapsed.count() / static_cast<double>(plan.ops.size());
  });
}

Row model_row(const ReplayPlan& plan, memscope::bench::TieBreak tie, int repeat) {
  const memscope::bench::TorchRulesResult r = memscope::bench::replay_torch_rules(plan, tie);
  const double ns =
      model_ns_per_op(plan, repeat, [&] { (void)memscope::bench::replay_torch_rules(plan, tie); });
  const bool lowest = tie == memscope::bench::TieBreak::lowest_address;
  return {lowest ? "PyTorch rules, ties to lowest address (model)"
                 : "PyTorch rules, ties to most recent (model)",
          r.peak_reserved,
          r.peak_requested,
          std::to_string(r.segments),
          "0",
          "0",
          per_1k(r.segments, plan.ops.size()),
          fmt::format("{:.0f} (model)", ns)};
}

Row expandable_model_row(const ReplayPlan& plan, int repeat) {
  const memscope::bench::TorchExpandableResult r = memscope::bench::replay_torch_expandable(plan);
  const double ns =
      model_ns_per_op(plan, repeat, [&] { (void)memscope::bench::replay_torch_expandable(plan); });
  return {"PyTorch expandable_segments (model)",
          r.peak_reserved,
          r.peak_requested,
          std::to_string(r.segments),
          "0",
          "0",
          per_1k(r.map_calls, plan.ops.size()),
          fmt::format("{:.0f} (model)", ns)};
}

// Which of PyTorch's expandable rules the figure depends on: each switched off alone, and whether
// memscope's expandable segments place as the model does (its series against the model's, op by
// op, at 2 MiB pages).
void print_expandable_analysis(const ReplayPlan& plan) {
  using memscope::bench::ExpandableRules;
  using memscope::bench::TieBreak;
  struct Variant {
    std::string what;
    ExpandableRules rules;
  };
  const auto with = [](std::size_t page_mib, bool tail_by_growth, bool split_any, TieBreak tie) {
    ExpandableRules rules;
    rules.large_page = page_mib * memscope::MiB;
    rules.tail_ranks_by_growth = tail_by_growth;
    rules.split_any_remainder = split_any;
    rules.tie = tie;
    return rules;
  };
  constexpr TieBreak lowest = TieBreak::lowest_address;
  constexpr TieBreak recent = TieBreak::most_recent;
  // At PyTorch's pages, one rule changed at a time.
  const std::vector<Variant> variants = {
      {"as PyTorch (large pool pages of 20 MiB)", ExpandableRules{}},
      {"the block before the tail ranked by its own size", with(20, false, true, lowest)},
      {"large remainders of 1 MiB or less not split (default rules)",
       with(20, true, false, lowest)},
      {"ties to the most recently freed", with(20, true, true, recent)},
      {"large pool pages of 2 MiB", with(2, true, true, lowest)},
      {"large pool pages of 16 MiB", with(16, true, true, lowest)},
      {"large pool pages of 32 MiB", with(32, true, true, lowest)}};
  // At memscope's default 2 MiB pages, the rules memscope once had instead of PyTorch's (until
  // this benchmark found them): default split, the tail block by its own size, recency ties.
  const std::vector<Variant> at_2mib = {
      {"2 MiB pages", with(2, true, true, lowest)},
      {"2 MiB pages, ties to the most recent", with(2, true, true, recent)},
      {"2 MiB pages, the tail block by its own size", with(2, false, true, lowest)},
      {"2 MiB pages, default split", with(2, true, false, lowest)},
      {"2 MiB pages, tail by own size, most recent", with(2, false, true, recent)},
      {"2 MiB pages, tail by own size, most recent, default split", with(2, false, false, recent)}};
  memscope::ReplayOptions options;
  options.config = memscope::AllocatorConfig::parse(
      "expandable_segments:true,expandable_segments_page_size:2MiB,"
      "expandable_segments_recycling:never");
  options.record_series = true;
  std::vector<std::size_t> ours;
  try {
    for (const auto& sample : memscope::replay(plan, options).series) {
      ours.push_back(static_cast<std::size_t>(sample.reserved_bytes));
    }
  } catch (const memscope::Error&) {
    ours.clear();  // this build cannot replay expandable segments: no comparison
  }
  const auto print = [&](const Variant& v, bool compare) {
    const auto r = memscope::bench::replay_torch_expandable(plan, v.rules);
    std::string same;
    if (compare && !ours.empty()) {
      const auto diff = std::mismatch(r.reserved_series.begin(), r.reserved_series.end(),
                                      ours.begin(), ours.end());
      same = diff.first == r.reserved_series.end() && diff.second == ours.end()
                 ? "; identical to memscope's after every op"
                 : fmt::format("; differs from memscope's after op {}",
                               diff.first - r.reserved_series.begin());
    }
    fmt::print("  {:<60} {:.4f}; map_block {} ({} per 1k events); pages {} ({} per 1k){}\n", v.what,
               static_cast<double>(r.peak_reserved) / static_cast<double>(plan.peak_live),
               r.map_calls, per_1k(r.map_calls, plan.ops.size()), r.pages_mapped,
               per_1k(r.pages_mapped, plan.ops.size()), same);
  };
  fmt::print("\nPyTorch expandable_segments model (reserved / peak live), one rule changed:\n");
  for (const Variant& v : variants) print(v, false);
  fmt::print(
      "\nthe model at 2 MiB pages, rules changed, against memscope expandable_segments:true with "
      "2 MiB pages and recycling never (reserved bytes op by op):\n");
  for (const Variant& v : at_2mib) print(v, true);
}

// The tie rule's effect beyond the peak: reserved bytes after every op, compared step by step.
void print_tie_analysis(const ReplayPlan& plan) {
  using memscope::bench::TieBreak;
  const auto lowest = memscope::bench::replay_torch_rules(plan, TieBreak::lowest_address);
  const auto recent = memscope::bench::replay_torch_rules(plan, TieBreak::most_recent);
  memscope::ReplayOptions options;
  options.record_series = true;
  const memscope::ReplayResult ours = memscope::replay(plan, options);
  std::vector<std::size_t> ours_reserved;
  for (const auto& sample : ours.series) {
    ours_reserved.push_back(static_cast<std::size_t>(sample.reserved_bytes));
  }
  const auto compare = [](const std::vector<std::size_t>& a, const std::vector<std::size_t>& b) {
    const auto diff = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
    if (diff.first == a.end() && diff.second == b.end()) {
      return fmt::format("identical after all {} ops", a.size());
    }
    return fmt::format("first differ after op {}", diff.first - a.begin());
  };
  fmt::print(
      "\nequal-size ties (another cached block of the chosen size on hand): {} of {} "
      "cache hits with lowest-address ties, {} of {} with most-recent ties\n",
      lowest.ties, lowest.cache_hits, recent.ties, recent.cache_hits);
  fmt::print("reserved bytes, lowest-address model vs most-recent model: {}\n",
             compare(lowest.reserved_series, recent.reserved_series));
  fmt::print("reserved bytes, lowest-address model vs memscope default: {}\n",
             compare(lowest.reserved_series, ours_reserved));
}

void print_table(const std::vector<Row>& rows) {
  const std::vector<std::string> head = {
      "config",          "peak reserved (B)", "peak live (B)", "reserved / peak live",
      "segments (peak)", "segments freed",    "OOMs",          "map+unmap per 1k events",
      "ns/event"};
  std::vector<std::vector<std::string>> cells;
  for (const Row& r : rows) {
    const double ratio = static_cast<double>(r.peak_reserved) / static_cast<double>(r.peak_live);
    const bool failed = r.peak_reserved == 0;
    cells.push_back({r.config, failed ? "-" : format_count(r.peak_reserved),
                     format_count(r.peak_live), failed ? "-" : fmt::format("{:.4f}", ratio),
                     r.segments, r.device_frees, r.ooms, r.map_per_1k, r.ns_per_event});
  }
  std::vector<std::size_t> width(head.size());
  for (std::size_t c = 0; c < head.size(); ++c) {
    width[c] = head[c].size();
    for (const auto& line : cells) width[c] = std::max(width[c], line[c].size());
  }
  const auto print_line = [&](const std::vector<std::string>& line) {
    std::string out = "|";
    for (std::size_t c = 0; c < line.size(); ++c) {
      // Text left, numbers right, as Markdown's alignment row below says.
      out += c == 0 ? fmt::format(" {:<{}} |", line[c], width[c])
                    : fmt::format(" {:>{}} |", line[c], width[c]);
    }
    fmt::print("{}\n", out);
  };
  print_line(head);
  std::string rule = "|";
  for (std::size_t c = 0; c < head.size(); ++c) {
    rule += fmt::format(" {}{} |", std::string(width[c] - 1, '-'), c == 0 ? '-' : ':');
  }
  fmt::print("{}\n", rule);
  for (const auto& line : cells) print_line(line);
}

}  // namespace

int main(int argc, char** argv) {
  const auto small = memscope::corpus::find_trace(memscope::corpus::kSmallTrainStep);
  std::string path = small ? small->string() : std::string();
  int repeat = 51;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--help" || arg == "-h") {
      fmt::print("usage: {} [snapshot.pickle] [--repeat N]\n", argv[0]);
      return 0;
    } else {
      path = arg;
    }
  }
  if (path.empty()) {
    fmt::print("skipped: {}\n",
               memscope::corpus::missing_reason(memscope::corpus::kSmallTrainStep));
    return 0;
  }
  try {
    const auto start = std::chrono::steady_clock::now();
    const ReplayPlan plan = memscope::build_replay_plan(memscope::read_torch_snapshot_file(path));
    const std::chrono::duration<double, std::milli> read_ms =
        std::chrono::steady_clock::now() - start;
    fmt::print("trace: {} (read and planned in {:.0f} ms)\n", path, read_ms.count());
    fmt::print(
        "plan: {} operations ({} starting blocks + {} traced); live before {} B; "
        "peak live {} B; live at end {} B, {} the snapshot's active bytes\n\n",
        format_count(plan.ops.size()), plan.starting_blocks(), format_count(plan.traced_ops),
        format_count(plan.live_before), format_count(plan.peak_live),
        format_count(plan.live_at_end), plan.ends_as_snapshot() ? "equal to" : "NOT EQUAL to");
    std::vector<Row> rows;
    rows.push_back({"PyTorch at the dump (warm cache, from the file)", plan.reserved_at_dump,
                    plan.peak_live, std::to_string(plan.segments_at_dump), "-", "-", "-", "-"});
    rows.push_back(model_row(plan, memscope::bench::TieBreak::lowest_address, repeat));
    rows.push_back(model_row(plan, memscope::bench::TieBreak::most_recent, repeat));
    rows.push_back(expandable_model_row(plan, repeat));
    for (const char* settings : {"", "max_split_size:200MiB", "roundup_power2_divisions:4",
                                 "garbage_collection_threshold:0.8,memory_limit:16GiB"}) {
      rows.push_back(memscope_row(plan, settings, repeat));
    }
    // expandable_segments_page_size is a power of two: 16 and 32 MiB bracket PyTorch's 20 MiB.
    for (const char* page : {"2MiB", "16MiB", "32MiB"}) {
      for (const char* policy : {"never", "at_limit", "above_peak", "always"}) {
        rows.push_back(memscope_row(
            plan,
            fmt::format("expandable_segments:true,expandable_segments_page_size:{},"
                        "expandable_segments_recycling:{}",
                        page, policy),
            repeat, fmt::format("memscope expandable, {} pages, recycling {}", page, policy)));
      }
    }
    // Under a memory limit: 13,280 MiB is exactly what PyTorch's placement needs here (peak live
    // is 13,279 MiB), 13,400 MiB leaves a little room. Where at_limit would recycle, and what the
    // other policies do there.
    for (const char* limit : {"13280MiB", "13400MiB"}) {
      for (const char* policy : {"never", "at_limit", "above_peak"}) {
        rows.push_back(memscope_row(
            plan,
            fmt::format("expandable_segments:true,expandable_segments_recycling:{},memory_limit:{}",
                        policy, limit),
            repeat,
            fmt::format("memscope expandable, 2MiB pages, recycling {}, limit {}", policy, limit)));
      }
    }
    print_table(rows);
    print_tie_analysis(plan);
    print_expandable_analysis(plan);
    fmt::print(
        "\nsimulated device: 80 GiB; ns/event: median of {} replays; memscope expandable rows: "
        "expandable_segments:true,expandable_segments_page_size:<pages>,"
        "expandable_segments_recycling:<policy>\n",
        repeat);
  } catch (const memscope::Error& e) {
    fmt::print(stderr, "memscope_replay_bench: {}\n", e.what());
    return 1;
  }
  return 0;
}
