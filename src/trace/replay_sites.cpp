// Which code allocated what was live at the peaks: stacks reduced to their blamed frame
// (frame_kinds.cpp), shown in a capped width, and the replay's moments given their times and
// tags from the trace.
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "memscope/trace.hpp"

namespace memscope {
namespace {

// Windows paths (PyTorch on Windows records them) read as POSIX ones; copied only when needed.
std::string forward_slashes(const std::string& path) {
  std::string out = path;
  std::replace(out.begin(), out.end(), '\\', '/');
  return out;
}

// A demangled C++ name without what makes it long and says little: its parameter list, a
// trailing " const" or " [clone .isra.0]", and "(anonymous namespace)::".
std::string short_function(std::string name) {
  static constexpr std::string_view kAnonymous = "(anonymous namespace)::";
  for (std::size_t at = name.find(kAnonymous); at != std::string::npos;
       at = name.find(kAnonymous)) {
    name.erase(at, kAnonymous.size());
  }
  if (const std::size_t clone = name.rfind(" [clone "); clone != std::string::npos) {
    name.resize(clone);
  }
  if (name.ends_with(" const")) name.resize(name.size() - 6);
  if (!name.ends_with(')')) return name;
  int depth = 0;
  for (std::size_t i = name.size(); i-- > 0;) {
    if (name[i] == ')') ++depth;
    if (name[i] == '(' && --depth == 0) {
      if (i > 0) name.resize(i);  // "(lambda)" alone stays
      break;
    }
  }
  return name;
}

// Code points in UTF-8 text (continuation bytes are 10xxxxxx).
std::size_t code_points(std::string_view text) {
  return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0U) != 0x80U;
  }));
}

// The byte offset of code point `n` of `text` (its size when there are fewer).
std::size_t byte_of(std::string_view text, std::size_t n) {
  std::size_t seen = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0U) == 0x80U) continue;
    if (seen++ == n) return i;
  }
  return text.size();
}

// `text` in at most `width` code points: its start and end around "..." (two thirds of what
// is kept from the start, where a name begins, one third from the end, where a file name or
// a method is).
std::string capped(const std::string& text, std::size_t width) {
  const std::size_t n = code_points(text);
  if (n <= width || width < 5) return text;
  const std::size_t keep = width - 3;
  const std::size_t tail = keep / 3;
  const std::size_t head = keep - tail;
  return text.substr(0, byte_of(text, head)) + "..." + text.substr(byte_of(text, n - tail));
}

}  // namespace

const char* to_string(SiteOrigin origin) noexcept {
  switch (origin) {
    case SiteOrigin::before_recording:
      return "before_recording";
    case SiteOrigin::freed_in_trace:
      return "freed_in_trace";
    case SiteOrigin::traced:
      break;
  }
  return "traced";
}

std::string ReplaySite::where() const {
  const bool no_frames = frame.filename.empty() && frame.name.empty();
  if (no_frames) {
    return origin == SiteOrigin::traced ? "<no frames>" : "<allocated before recording>";
  }
  std::string out;
  if (frame.filename != "??") {
    const std::string file = forward_slashes(frame.filename);
    const std::size_t slash = file.rfind('/');
    out = slash == std::string::npos ? file : file.substr(slash + 1);
  }
  if (frame.line > 0) out.append(":").append(std::to_string(frame.line));
  if (!frame.name.empty()) {
    if (!out.empty()) out.push_back(' ');
    out.append(short_function(frame.name));
  }
  if (origin != SiteOrigin::freed_in_trace) return capped(out, kSiteWidth);
  static constexpr std::string_view kBefore = "freed at ";
  static constexpr std::string_view kAfter = " (allocated before recording)";
  return std::string(kBefore) + capped(out, kSiteWidth - kBefore.size() - kAfter.size()) +
         std::string(kAfter);
}

namespace {

// Groups a breakdown's stacks by their blamed frame and origin; the largest `top` first.
// `blamed` caches each stack's frame (empty until looked up): a stack is judged once however
// many breakdowns and allocations share it.
using BlamedFrames = std::vector<std::optional<const TraceFrame*>>;

void add_sites(const TorchSnapshot& snapshot, LiveBreakdown& live, std::size_t top,
               BlamedFrames& blamed) {
  std::map<std::tuple<std::string, std::int64_t, std::string, SiteOrigin>, ReplaySite> sites;
  for (const StackBytes& s : live.stacks) {
    const TraceFrame* found = nullptr;
    if (s.stack < blamed.size()) {
      if (!blamed[s.stack]) blamed[s.stack] = blamed_frame(snapshot.strings, s.stack);
      found = *blamed[s.stack];
    }
    const TraceFrame frame = found != nullptr ? *found : TraceFrame{};
    ReplaySite& site = sites[{frame.filename, frame.line, frame.name, s.origin}];
    site.frame = frame;
    site.origin = s.origin;
    site.bytes += s.bytes;
    site.count += s.count;
  }
  live.top_sites.clear();
  for (auto& [key, site] : sites) live.top_sites.push_back(std::move(site));
  std::stable_sort(live.top_sites.begin(), live.top_sites.end(),
                   [](const ReplaySite& a, const ReplaySite& b) {
                     return a.bytes != b.bytes ? a.bytes > b.bytes : a.count > b.count;
                   });
  if (live.top_sites.size() > top) live.top_sites.resize(top);
}

}  // namespace

void explain_with_trace(const TorchSnapshot& snapshot, const ReplayPlan& plan, ReplayResult& result,
                        std::size_t top_sites) {
  const auto device = static_cast<std::size_t>(plan.device);
  static const std::vector<TraceEvent> kNoEvents;
  const std::vector<TraceEvent>& trace =
      device < snapshot.device_traces.size() ? snapshot.device_traces[device] : kNoEvents;
  for (const TraceEvent& e : trace) {
    if (e.time_us != 0) {
      result.trace_start_us = e.time_us;
      break;
    }
  }
  for (ReplayMoment* m : {&result.peak, &result.peak_live, &result.first_oom}) {
    if (!m->happened() || m->event == kBeforeTrace || m->event >= trace.size()) continue;
    const TraceEvent& e = trace[m->event];
    m->time_us = e.time_us;
    m->tag = e.tag < snapshot.strings.tags.size() ? snapshot.strings.tags[e.tag] : std::string();
  }

  BlamedFrames blamed(snapshot.strings.stacks.size());
  add_sites(snapshot, result.at_peak_live, top_sites, blamed);
  add_sites(snapshot, result.at_peak_reserved, top_sites, blamed);
}

void fill_top_sites(const TorchSnapshot& snapshot, LiveBreakdown& live, std::size_t top) {
  BlamedFrames blamed(snapshot.strings.stacks.size());
  add_sites(snapshot, live, top, blamed);
}

ReplayResult replay_trace(const TorchSnapshot& snapshot, std::int64_t device,
                          const ReplayOptions& options) {
  const ReplayPlan plan = build_replay_plan(snapshot, device);
  ReplayResult result = replay(plan, options);
  explain_with_trace(snapshot, plan, result, options.top_sites);
  return result;
}

}  // namespace memscope
