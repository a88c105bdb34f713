// memscope_replay_bench: fragmentation and speed of memscope's allocator on a real PyTorch trace.
//
// Replays the repository's real snapshot (tests/data/README.md) through memscope with several
// settings, and through a model of PyTorch's own default placement (bench/torch_rules.hpp) with
// both tie rules, so the one rule where memscope differs (equal sizes: most recently cached first,
// not lowest address) is measured in the same run. Prints a Markdown table.
//
//   memscope_replay_bench [snapshot.pickle] [--repeat N]
//
// ns/event is the median over N replays (default 51) of the allocate/deallocate calls alone.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "common/text.hpp"
#include "memscope/errors.hpp"
#include "memscope/trace.hpp"
#include "torch_rules.hpp"

namespace {

using memscope::ReplayPlan;

using memscope::detail::group_digits;

struct Row {
  std::string config;
  std::uint64_t peak_reserved = 0;
  std::uint64_t peak_live = 0;
  std::string segments;
  std::string device_frees;
  std::string ooms;
  std::string ns_per_event;
};

// The median resists the odd slow run (another process, a page fault) better than the mean.
template <class F>
double median(int repeat, F&& run_once) {
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(repeat));
  for (int i = 0; i < repeat; ++i) samples.push_back(run_once());
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

Row memscope_row(const ReplayPlan& plan, const std::string& settings, int repeat) {
  memscope::ReplayOptions options;
  options.config = memscope::AllocatorConfig::parse(settings);
  const memscope::ReplayResult r = memscope::replay(plan, options);
  const double ns = median(repeat, [&] { return memscope::replay(plan, options).ns_per_event; });
  return {fmt::format("memscope {}", settings.empty() ? std::string("default") : settings),
          static_cast<std::uint64_t>(r.peak_reserved),
          static_cast<std::uint64_t>(r.peak_requested),
          std::to_string(r.peak_segments),
          std::to_string(r.num_device_free),
          std::to_string(r.num_ooms),
          fmt::format("{:.0f}", ns)};
}

Row model_row(const ReplayPlan& plan, memscope::bench::TieBreak tie, int repeat) {
  const memscope::bench::TorchRulesResult r = memscope::bench::replay_torch_rules(plan, tie);
  const double ns = median(repeat, [&] {
    const auto start = std::chrono::steady_clock::now();
    (void)memscope::bench::replay_torch_rules(plan, tie);
    const std::chrono::duration<double, std::nano> elapsed =
        std::chrono::steady_clock::now() - start;
    return elapsed.count() / static_cast<double>(plan.ops.size());
  });
  const bool lowest = tie == memscope::bench::TieBreak::lowest_address;
  return {lowest ? "PyTorch rules, ties to lowest address (model)"
                 : "PyTorch rules, ties to most recent (model)",
          r.peak_reserved,
          r.peak_requested,
          std::to_string(r.segments),
          "0",
          "0",
          fmt::format("{:.0f} (model)", ns)};
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
      "segments (peak)", "segments freed",    "OOMs",          "ns/event"};
  std::vector<std::vector<std::string>> cells;
  for (const Row& r : rows) {
    const double ratio = static_cast<double>(r.peak_reserved) / static_cast<double>(r.peak_live);
    cells.push_back({r.config, group_digits(r.peak_reserved), group_digits(r.peak_live),
                     fmt::format("{:.4f}", ratio), r.segments, r.device_frees, r.ooms,
                     r.ns_per_event});
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
  std::string path = MEMSCOPE_REAL_TRACE;
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
  try {
    const auto start = std::chrono::steady_clock::now();
    const ReplayPlan plan = memscope::build_replay_plan(memscope::read_torch_snapshot_file(path));
    const std::chrono::duration<double, std::milli> read_ms =
        std::chrono::steady_clock::now() - start;
    fmt::print("trace: {} (read and planned in {:.0f} ms)\n", path, read_ms.count());
    fmt::print(
        "plan: {} operations ({} starting blocks + {} traced); live before {} B; "
        "peak live {} B; live at end {} B, {} the snapshot's active bytes\n\n",
        group_digits(plan.ops.size()), plan.starting_blocks(), group_digits(plan.traced_ops),
        group_digits(plan.live_before), group_digits(plan.peak_live),
        group_digits(plan.live_at_end), plan.ends_as_snapshot() ? "equal to" : "NOT EQUAL to");
    std::vector<Row> rows;
    rows.push_back({"PyTorch at the dump (warm cache, from the file)", plan.reserved_at_dump,
                    plan.peak_live, std::to_string(plan.segments_at_dump), "-", "-", "-"});
    rows.push_back(model_row(plan, memscope::bench::TieBreak::lowest_address, repeat));
    rows.push_back(model_row(plan, memscope::bench::TieBreak::most_recent, repeat));
    for (const char* settings : {"", "max_split_size:200MiB", "roundup_power2_divisions:4",
                                 "garbage_collection_threshold:0.8,memory_limit:16GiB"}) {
      rows.push_back(memscope_row(plan, settings, repeat));
    }
    print_table(rows);
    print_tie_analysis(plan);
    fmt::print("\nsimulated device: 80 GiB; ns/event: median of {} replays\n", repeat);
  } catch (const memscope::Error& e) {
    fmt::print(stderr, "memscope_replay_bench: {}\n", e.what());
    return 1;
  }
  return 0;
}
