// analyze_growth() (growth.hpp): iterations from boundaries, tags or the repeating allocation
// sequence; what each iteration left live at the last boundary, by site and tag.
#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "common/text.hpp"
#include "memscope/errors.hpp"
#include "memscope/growth.hpp"
#include "memscope/report_text.hpp"
#include "memscope/trace.hpp"

namespace memscope {
namespace {

using detail::group_digits;

// Of the sequence's first allocations, this many at most are searched for a period, and periods
// up to a third of them: the search costs their product in comparisons.
constexpr std::size_t kPeriodWindow = 20000;
constexpr std::size_t kLongestPeriod = 4000;
constexpr double kPeriodMatch = 0.9;

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

constexpr std::string_view kSeparators = " _:=-#/";

// Where a tag names its step: "step N" / "iteration N" (separators between: space, _, :, =,
// -, #, /), as [begin, end) of the tag and N.
struct StepMention {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::uint64_t number = 0;
};

std::optional<StepMention> find_step(std::string_view tag) {
  const std::string t = lower(tag);
  for (const std::string_view word : {std::string_view("iteration"), std::string_view("step")}) {
    const std::size_t at = t.rfind(word);
    if (at == std::string::npos) continue;
    std::size_t i = at + word.size();
    while (i < t.size() && kSeparators.find(t[i]) != std::string_view::npos) ++i;
    if (i == t.size() || std::isdigit(static_cast<unsigned char>(t[i])) == 0) continue;
    StepMention m{at, i, 0};
    for (; i < t.size() && std::isdigit(static_cast<unsigned char>(t[i])) != 0; ++i) {
      m.number = m.number * 10 + static_cast<std::uint64_t>(t[i] - '0');
    }
    m.end = i;
    return m;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> step_number(std::string_view tag) {
  const auto m = find_step(tag);
  return m ? std::optional<std::uint64_t>(m->number) : std::nullopt;
}

// A tag without its step ("train/step 3: forward" -> "train/forward"): the category of what
// was allocated, the same in every iteration.
std::string category_of(std::string_view tag) {
  const auto m = find_step(tag);
  if (!m) return std::string(tag);
  std::string_view before = tag.substr(0, m->begin);
  std::string_view after = tag.substr(m->end);
  while (!before.empty() && kSeparators.find(before.back()) != std::string_view::npos) {
    before.remove_suffix(1);
  }
  while (!after.empty() && kSeparators.find(after.front()) != std::string_view::npos) {
    after.remove_prefix(1);
  }
  if (before.empty() || after.empty()) return std::string(before) + std::string(after);
  return std::string(before) + "/" + std::string(after);
}

std::vector<std::size_t> boundaries_from_tags(const TorchSnapshot& snapshot,
                                              const std::vector<TraceEvent>& trace) {
  std::vector<std::size_t> out;
  std::optional<std::uint64_t> current;
  std::vector<std::optional<std::uint64_t>> parsed(snapshot.strings.tags.size());
  std::vector<bool> done(snapshot.strings.tags.size(), false);
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const TraceEvent& e = trace[i];
    if (e.action != TraceAction::alloc || e.tag >= parsed.size()) continue;
    if (!done[e.tag]) {
      parsed[e.tag] = step_number(snapshot.strings.tags[e.tag]);
      done[e.tag] = true;
    }
    const std::optional<std::uint64_t> n = parsed[e.tag];
    if (!n) continue;
    if (current && *n != *current) out.push_back(i);
    current = n;
  }
  return out;
}

std::uint64_t key_of(const ReplayOp& op) {
  return (static_cast<std::uint64_t>(op.stack) << 40U) ^ static_cast<std::uint64_t>(op.size);
}

struct SiteKey {
  std::string file;
  std::int64_t line = 0;
  std::string name;
  std::string tag;
  // NOLINTNEXTLINE(modernize-use-nullptr): a false positive on a defaulted <=>
  auto operator<=>(const SiteKey&) const = default;
};

struct SiteTally {
  ReplaySite site;
  std::set<std::size_t> iterations;
};

}  // namespace

std::size_t detect_period(const std::vector<std::uint64_t>& keys, std::size_t min_repeats) {
  const std::size_t n = std::min(keys.size(), kPeriodWindow);
  const std::size_t repeats = std::max<std::size_t>(min_repeats, 2);
  const std::size_t longest = std::min(n / repeats, kLongestPeriod);
  for (std::size_t p = 2; p <= longest; ++p) {
    std::size_t same = 0;
    for (std::size_t i = 0; i + p < n; ++i) same += keys[i] == keys[i + p] ? 1U : 0U;
    if (static_cast<double>(same) >= kPeriodMatch * static_cast<double>(n - p)) return p;
  }
  return 0;
}

std::string GrowthSite::text() const {
  std::string where = site.where();
  if (!tag.empty()) where += " [" + tag + "]";
  return fmt::format("{}: +{} per iteration over {} iterations, {} held", where,
                     format_size(bytes_per_iteration), iterations, format_size(site.bytes));
}

GrowthResult analyze_growth(const TorchSnapshot& snapshot, std::int64_t device,
                            const GrowthOptions& options) {
  const ReplayPlan plan = build_replay_plan(snapshot, device);  // throws for a device w/o trace
  const std::vector<TraceEvent>& trace = snapshot.device_traces[static_cast<std::size_t>(device)];
  GrowthResult r;
  r.device = device;
  r.min_iterations = options.min_iterations;
  if (!options.boundaries.empty()) {
    for (std::size_t i = 0; i < options.boundaries.size(); ++i) {
      const std::size_t b = options.boundaries[i];
      if (b > trace.size() || (i > 0 && b <= options.boundaries[i - 1])) {
        throw UsageError(fmt::format(
            "growth: boundary {} (event {}) is {}: boundaries are increasing event indices up to "
            "the trace's {} events",
            i, b, b > trace.size() ? "beyond the trace" : "not after the one before it",
            trace.size()));
      }
    }
    r.boundaries = options.boundaries;
    r.boundaries_from = "given";
  } else if (auto tagged = boundaries_from_tags(snapshot, trace); tagged.size() >= 2) {
    r.boundaries = std::move(tagged);
    r.boundaries_from = "tags";
  } else {
    std::vector<std::uint64_t> keys;
    std::vector<std::size_t> events;
    for (const ReplayOp& op : plan.ops) {
      if (op.is_free || op.event == kBeforeTrace) continue;
      keys.push_back(key_of(op));
      events.push_back(op.event);
    }
    const std::size_t p = detect_period(keys, options.min_iterations + 1);
    if (p != 0) {
      for (std::size_t i = p; i < events.size(); i += p) r.boundaries.push_back(events[i]);
      r.boundaries_from = fmt::format("detected (a period of {} allocations)", p);
    } else {
      r.boundaries_from = "none";
    }
  }

  const std::vector<std::size_t>& bounds = r.boundaries;
  r.iterations = bounds.empty() ? 0 : bounds.size() - 1;
  const auto iteration_of = [&](std::uint32_t event) -> std::size_t {
    return static_cast<std::size_t>(std::upper_bound(bounds.begin(), bounds.end(), event) -
                                    bounds.begin());
  };
  // Live bytes at each boundary, and which allocations were still live at the last one.
  const std::size_t last = bounds.empty() ? trace.size() : bounds.back();
  std::vector<std::uint8_t> freed(plan.allocations, 0);
  std::size_t live = 0;
  std::size_t next = 0;
  for (const ReplayOp& op : plan.ops) {
    const std::size_t at = op.event == kBeforeTrace ? std::size_t{0} : std::size_t{op.event};
    while (next < bounds.size() && op.event != kBeforeTrace && at >= bounds[next]) {
      r.live_at_boundary.push_back(live);
      ++next;
    }
    if (op.event != kBeforeTrace && at >= last) break;
    if (op.is_free) {
      if (op.slot < freed.size() && freed[op.slot] == 0) live -= std::min(live, op.size);
      if (op.slot < freed.size()) freed[op.slot] = 1;
    } else {
      live += op.size;
    }
  }
  while (r.live_at_boundary.size() < bounds.size()) r.live_at_boundary.push_back(live);
  if (bounds.size() < 2) return r;

  // Retained: allocated in iteration k (between boundaries k-1 and k; 0 before the first),
  // k + 1 a whole iteration before the last boundary, and not freed by then.
  std::map<SiteKey, SiteTally> sites;
  std::vector<std::optional<const TraceFrame*>> blamed(snapshot.strings.stacks.size());
  const std::size_t eligible = bounds.size() - 1;  // iterations 0 .. K-2
  for (const ReplayOp& op : plan.ops) {
    if (op.is_free || op.event == kBeforeTrace || op.event >= last) continue;
    if (op.slot < freed.size() && freed[op.slot] != 0) continue;
    const std::size_t k = iteration_of(op.event);
    if (k >= eligible) continue;
    const TraceFrame* frame = nullptr;
    if (op.stack < blamed.size()) {
      if (!blamed[op.stack]) blamed[op.stack] = blamed_frame(snapshot.strings, op.stack);
      frame = *blamed[op.stack];
    }
    const TraceFrame f = frame != nullptr ? *frame : TraceFrame{};
    const std::string tag = op.tag < snapshot.strings.tags.size()
                                ? category_of(snapshot.strings.tags[op.tag])
                                : std::string();
    SiteTally& s = sites[{f.filename, f.line, f.name, tag}];
    s.site.frame = f;
    s.site.bytes += op.size;
    ++s.site.count;
    s.iterations.insert(k);
  }
  const std::size_t needed = std::max(options.min_iterations, (eligible + 1) / 2);
  for (auto& [key, tally] : sites) {
    if (tally.iterations.size() < needed) continue;
    GrowthSite g;
    g.site = tally.site;
    g.tag = key.tag;
    g.iterations = tally.iterations.size();
    g.bytes_per_iteration = g.site.bytes / g.iterations;
    r.retained_bytes += g.site.bytes;
    r.sites.push_back(std::move(g));
  }
  std::stable_sort(r.sites.begin(), r.sites.end(), [](const GrowthSite& a, const GrowthSite& b) {
    return a.site.bytes > b.site.bytes;
  });
  if (r.sites.size() > options.top_sites) r.sites.resize(options.top_sites);
  return r;
}

report::Report GrowthResult::to_report(const std::string& title) const {
  report::Report r;
  r.title = title.empty() ? fmt::format("Growth across iterations on device {}", device) : title;
  r.summary.emplace_back("iterations", fmt::format("{} complete (boundaries: {})",
                                                   group_digits(iterations), boundaries_from));
  std::string verdict;
  if (boundaries.size() < 2) {
    verdict = "unknown: fewer than two iteration boundaries";
  } else if (growing()) {
    std::size_t per = 0;
    for (const GrowthSite& s : sites) per += s.bytes_per_iteration;
    verdict = fmt::format("grows: +{} per iteration at {} site{}, {} held", format_size(per),
                          sites.size(), sites.size() == 1 ? "" : "s", format_size(retained_bytes));
  } else {
    verdict =
        fmt::format("no growth: no site keeps memory from {} or more iterations past the next one",
                    std::max(min_iterations, boundaries.size() / 2));
  }
  r.summary.emplace_back("verdict", verdict);
  if (!live_at_boundary.empty()) {
    std::string live;
    const std::size_t n = live_at_boundary.size();
    for (std::size_t i = 0; i < n; ++i) {
      if (n > 12 && i == 6) {
        live += ", ...";
        i = n - 6;
      }
      live += (live.empty() ? "" : ", ") + format_size(live_at_boundary[i]);
    }
    r.summary.emplace_back("live at each boundary", live);
  }
  report::TextTable t(
      {{"where"}, {"tag"}, {"per iteration", true}, {"iterations", true}, {"held", true}});
  for (const GrowthSite& s : sites) {
    t.add_row({s.site.where(), s.tag.empty() ? "-" : s.tag,
               "+" + format_size(s.bytes_per_iteration), group_digits(s.iterations),
               format_size(s.site.bytes)});
  }
  report::Table table = t.table();
  table.title = "Growing sites (allocated in one iteration, live at the last boundary)";
  r.tables.push_back(std::move(table));
  for (const GrowthSite& s : sites) r.notes.push_back(s.text());
  return r;
}

std::string GrowthResult::explain() const {
  return report::render_text(to_report());
}

}  // namespace memscope
