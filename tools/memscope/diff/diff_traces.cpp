// diff_traces (diff.hpp): two traces, allocation site by allocation site.
//
// Live bytes by site come from the replay plan (what the program asked for, independent of the
// allocator's settings) at two moments: the op after which live bytes peak, and the end. The
// stacks are reduced to sites by the library's own rule (explain_with_trace(), the innermost
// frame of user code), so the sites read as `memscope replay` prints them.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <unordered_map>
#include <vector>

#include "cli.hpp"
#include "diff/diff.hpp"
#include "memscope/replay.hpp"
#include "memscope/units.hpp"

namespace memscope::cli {
namespace {

using Json = nlohmann::json;

using TraceFigures = TraceDiff::Figures;
using Site = TraceDiff::Site;

// Live requested bytes per stack after op `last` (inclusive) of the plan.
std::vector<StackBytes> live_stacks(const ReplayPlan& plan, std::size_t last) {
  std::unordered_map<std::uint64_t, std::size_t> live;  // slot (or address) -> alloc op
  for (std::size_t i = 0; i <= last && i < plan.ops.size(); ++i) {
    const ReplayOp& op = plan.ops[i];
    const std::uint64_t key = plan.linked ? op.slot : op.addr;
    if (op.is_free) {
      live.erase(key);
    } else {
      live[key] = i;
    }
  }
  std::vector<std::size_t> allocations;
  allocations.reserve(live.size());
  for (const auto& [key, i] : live) allocations.push_back(i);
  return live_by_stack(plan, allocations).stacks;
}

std::map<std::string, std::size_t> by_site(const TorchSnapshot& snapshot, const ReplayPlan& plan,
                                           std::vector<StackBytes> stacks) {
  ReplayResult grouped;
  grouped.at_peak_live.stacks = std::move(stacks);
  explain_with_trace(snapshot, plan, grouped, std::numeric_limits<std::size_t>::max());
  std::map<std::string, std::size_t> out;
  for (const ReplaySite& site : grouped.at_peak_live.top_sites) out[site.where()] += site.bytes;
  return out;
}

std::int64_t first_device(const TorchSnapshot& snapshot, const std::string& name,
                          std::optional<std::int64_t> device) {
  const std::vector<std::int64_t> devices = trace_devices(snapshot);
  if (device) {
    if (std::find(devices.begin(), devices.end(), *device) == devices.end()) {
      throw UsageFailure(
          fmt::format("--device {}: '{}' has no events on that device", *device, name));
    }
    return *device;
  }
  if (devices.empty()) {
    throw InputFailure("'" + name +
                       "': the trace holds no events on any device, nothing to compare");
  }
  return devices.front();
}

TraceFigures figures_of(const TorchSnapshot& snapshot, const std::string& name,
                        std::optional<std::int64_t> device) {
  TraceFigures f;
  f.device = first_device(snapshot, name, device);
  const ReplayPlan plan = build_replay_plan(snapshot, f.device);
  f.events = plan.traced_ops;
  f.peak_live = plan.peak_live;
  f.live_at_end = plan.live_at_end;
  const ReplayResult result = replay_trace(snapshot, f.device, ReplayOptions{});
  f.peak_reserved = result.peak_reserved;
  f.peak_stage = result.peak_live.tag;
  if (!plan.ops.empty()) {
    f.at_peak = by_site(snapshot, plan, live_stacks(plan, plan.peak_live_op));
    f.at_end = by_site(snapshot, plan, live_stacks(plan, plan.ops.size() - 1));
  }
  return f;
}

std::int64_t signed_change(std::size_t a, std::size_t b) {
  return static_cast<std::int64_t>(b) - static_cast<std::int64_t>(a);
}

std::size_t get(const std::map<std::string, std::size_t>& m, const std::string& key) {
  const auto it = m.find(key);
  return it == m.end() ? 0 : it->second;
}

// Every site of either trace: the biggest growth at the peak first, then at the end; shrinking
// sites after.
std::vector<Site> site_rows(const TraceFigures& fa, const TraceFigures& fb) {
  std::map<std::string, Site> sites;
  for (const auto* m : {&fa.at_peak, &fb.at_peak, &fa.at_end, &fb.at_end}) {
    for (const auto& [where, bytes] : *m) sites[where].where = where;
  }
  std::vector<Site> rows;
  for (auto& [where, s] : sites) {
    s.peak_a = get(fa.at_peak, where);
    s.peak_b = get(fb.at_peak, where);
    s.end_a = get(fa.at_end, where);
    s.end_b = get(fb.at_end, where);
    rows.push_back(s);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Site& x, const Site& y) {
    if (x.peak_change() != y.peak_change()) return x.peak_change() > y.peak_change();
    return x.end_change() > y.end_change();
  });
  return rows;
}

Json trace_json(const TraceFigures& f) {
  return Json{{"device", f.device},
              {"events", f.events},
              {"peak_reserved", f.peak_reserved},
              {"peak_live", f.peak_live},
              {"live_at_end", f.live_at_end},
              {"peak_stage", f.peak_stage}};
}

Json site_json(const Site& s) {
  return {{"site", s.where},
          {"peak_a", s.peak_a},
          {"peak_b", s.peak_b},
          {"peak_change", s.peak_change()},
          {"end_a", s.end_a},
          {"end_b", s.end_b},
          {"end_change", s.end_change()}};
}

// Peak reserved, peak live and live at the end of both traces.
report::Table totals_table(const TraceFigures& fa, const TraceFigures& fb) {
  report::Table totals{
      "totals", {"", "A", "B", "change", "change %"}, {false, true, true, true, true}, {}, {}};
  const auto total = [&](const char* what, std::size_t x, std::size_t y) {
    totals.rows.push_back({what, format_size(x), format_size(y), signed_bytes(signed_change(x, y)),
                           percent_change(static_cast<double>(x), static_cast<double>(y))});
  };
  total("peak reserved (default settings)", static_cast<std::size_t>(fa.peak_reserved),
        static_cast<std::size_t>(fb.peak_reserved));
  total("peak live", fa.peak_live, fb.peak_live);
  total("live at the end", fa.live_at_end, fb.live_at_end);
  return totals;
}

// "peak live +312.00 MiB (+14.0%), mostly model.py:212 forward (+300.00 MiB)": "mostly" names
// the site whose change at the peak goes the same way and is the largest.
std::string trace_verdict(const TraceFigures& fa, const TraceFigures& fb,
                          const std::vector<Site>& rows) {
  const std::int64_t peak_change = signed_change(fa.peak_live, fb.peak_live);
  const std::string pct =
      percent_change(static_cast<double>(fa.peak_live), static_cast<double>(fb.peak_live));
  std::string summary =
      fmt::format("peak live {}{}", signed_bytes(peak_change), pct.empty() ? "" : " (" + pct + ")");
  const Site* mostly = nullptr;
  for (const Site& s : rows) {
    if (s.peak_change() == 0 || (s.peak_change() > 0) != (peak_change > 0)) continue;
    if (mostly == nullptr || std::llabs(s.peak_change()) > std::llabs(mostly->peak_change())) {
      mostly = &s;
    }
  }
  if (peak_change != 0 && mostly != nullptr) {
    summary += fmt::format(", mostly {} ({})", mostly->where, signed_bytes(mostly->peak_change()));
  }
  return summary;
}

// The sites that changed, the first `top` of them; the note counts the rest.
report::Table sites_table(const std::vector<Site>& sites, std::size_t top) {
  report::Table table{
      "live bytes by allocation site at the peak of live bytes and at the end, the biggest "
      "growth first",
      {"site", "peak A", "peak B", "change", "end A", "end B", "change"},
      {false, true, true, true, true, true, true},
      {},
      {}};
  std::size_t changed = 0;
  for (const Site& s : sites) {
    if (s.peak_change() == 0 && s.end_change() == 0) continue;
    ++changed;
    if (table.rows.size() == top) continue;
    table.rows.push_back({s.where, format_size(s.peak_a), format_size(s.peak_b),
                          signed_bytes(s.peak_change()), format_size(s.end_a), format_size(s.end_b),
                          signed_bytes(s.end_change())});
  }
  std::vector<std::string> notes;
  if (changed == 0) notes.emplace_back("no site changed");
  const std::string more = more_note(changed, table.rows.size(), "sites changed");
  if (!more.empty()) notes.push_back(more);
  if (sites.size() != changed)
    notes.push_back(fmt::format("{} sites unchanged", sites.size() - changed));
  for (const std::string& n : notes) table.note += (table.note.empty() ? "" : "; ") + n;
  return table;
}

}  // namespace

std::int64_t TraceDiff::Site::peak_change() const noexcept {
  return signed_change(peak_a, peak_b);
}

std::int64_t TraceDiff::Site::end_change() const noexcept {
  return signed_change(end_a, end_b);
}

TraceDiff diff_traces(const TorchSnapshot& a, const TorchSnapshot& b, const DiffNames& names,
                      std::optional<std::int64_t> device) {
  TraceDiff out;
  out.names = names;
  out.a = figures_of(a, names.a, device);
  out.b = figures_of(b, names.b, device);
  out.sites = site_rows(out.a, out.b);
  out.summary = trace_verdict(out.a, out.b, out.sites);
  return out;
}

report::Report TraceDiff::to_report() const {
  report::Report report;
  report.title = fmt::format("traces: A = {} (device {}, {} events), B = {} (device {}, {} events)",
                             names.a, a.device, a.events, names.b, b.device, b.events);
  report.tables.push_back(totals_table(a, b));
  report.tables.push_back(sites_table(sites, names.top));
  report.notes.push_back(summary);
  return report;
}

nlohmann::json TraceDiff::to_json() const {
  Json out = diff_json("traces", names, summary);
  out["trace_a"] = trace_json(a);
  out["trace_b"] = trace_json(b);
  Json sites_json = Json::array();
  for (const Site& s : sites) sites_json.push_back(site_json(s));
  out["sites"] = std::move(sites_json);
  return out;
}

}  // namespace memscope::cli
