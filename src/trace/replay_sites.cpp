// Which code allocated what was live at the peak: stacks reduced to their innermost frame of
// user code, and the replay's moments given their times and tags from the trace.
#include <algorithm>
#include <array>
#include <map>
#include <string>
#include <string_view>
#include <tuple>

#include "memscope/trace.hpp"

namespace memscope {
namespace {

bool contains_any(std::string_view text, const auto& needles) {
  return std::any_of(std::begin(needles), std::end(needles),
                     [&](std::string_view n) { return text.find(n) != std::string_view::npos; });
}

// Windows paths (PyTorch on Windows records them) read as POSIX ones; copied only when needed.
std::string forward_slashes(const std::string& path) {
  std::string out = path;
  std::replace(out.begin(), out.end(), '\\', '/');
  return out;
}

// The frame to blame for a stack: the first (innermost) frame of user code; failing that the
// first that is not interpreter or unwinder internals (a library call the user made); failing
// that the innermost. nullptr for an empty or unknown stack. Frames are looked at in place and
// each frame is judged once (`plumbing`: -1 not yet, else the verdict): copying every stack's
// frames (two strings each) cost more than the replay's own bookkeeping.
const TraceFrame* site_of(const TraceStrings& strings, StackId stack,
                          std::vector<std::int8_t>& plumbing) {
  if (stack >= strings.stacks.size()) return nullptr;
  const std::vector<std::uint32_t>& ids = strings.stacks[stack];
  const auto frame = [&](std::uint32_t id) -> const TraceFrame* {
    return id < strings.frames.size() ? &strings.frames[id] : nullptr;
  };
  for (const std::uint32_t id : ids) {
    const TraceFrame* f = frame(id);
    if (f == nullptr) continue;
    if (plumbing[id] < 0) plumbing[id] = is_plumbing_frame(*f) ? 1 : 0;
    if (plumbing[id] == 0) return f;
  }
  for (const std::uint32_t id : ids) {
    const TraceFrame* f = frame(id);
    if (f != nullptr && !f->filename.empty() && !is_plumbing_frame({"", f->line, f->name})) {
      return f;
    }
  }
  return ids.empty() ? nullptr : frame(ids.front());
}

}  // namespace

bool is_plumbing_frame(const TraceFrame& frame) {
  // What PyTorch's memory viewer also hides: the unwinder, the interpreter's C entry points,
  // the dispatcher's registration and boxing layers.
  static constexpr std::array<std::string_view, 7> kInternalNames = {
      "unwind::unwind",  "CapturedTraceback::gather",
      "gather_with_cpp", "__libc_start_main",
      "PyEval_",         "PyObject_",
      "PyFunction_"};
  static constexpr std::array<std::string_view, 10> kInternalFiles = {"core/boxing",
                                                                      "/Register",
                                                                      "/Redispatch",
                                                                      "pythonrun.c",
                                                                      "Modules/main.c",
                                                                      "Objects/call.c",
                                                                      "Objects/methodobject.c",
                                                                      "pycore_ceval.h",
                                                                      "ceval.c",
                                                                      "cpython/abstract.h"};
  // Frameworks and libraries, which a user calls but does not change: installed packages, the
  // standard library, shared objects (unsymbolized C++), the allocators' own C++ namespaces.
  static constexpr std::array<std::string_view, 6> kLibraryFiles = {
      "/site-packages/", "/dist-packages/", "/lib/python3", "/lib64/python3", ".so.", "<frozen "};
  static constexpr std::array<std::string_view, 5> kLibraryNamespaces = {
      "memscope::", "c10::", "at::", "torch::", "std::"};
  const bool library_namespace =
      std::any_of(kLibraryNamespaces.begin(), kLibraryNamespaces.end(),
                  [&](std::string_view ns) { return frame.name.starts_with(ns); });
  if (frame.name == "_start" || library_namespace || contains_any(frame.name, kInternalNames)) {
    return true;
  }
  const bool windows = frame.filename.find('\\') != std::string::npos;
  const std::string converted = windows ? forward_slashes(frame.filename) : std::string();
  const std::string_view file = windows ? std::string_view(converted) : frame.filename;
  return file.ends_with(".so") || contains_any(file, kInternalFiles) ||
         contains_any(file, kLibraryFiles);
}

std::string ReplaySite::where() const {
  if (frame.filename.empty() && frame.name.empty()) return "<no frames>";
  const std::string file = forward_slashes(frame.filename);
  const std::size_t slash = file.rfind('/');
  std::string out = slash == std::string::npos ? file : file.substr(slash + 1);
  if (frame.line > 0) out.append(":").append(std::to_string(frame.line));
  if (!frame.name.empty()) {
    if (!out.empty()) out.push_back(' ');
    out.append(frame.name);
  }
  return out;
}

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

  // Group the peak's live stacks by their site; the largest first.
  std::map<std::tuple<std::string, std::int64_t, std::string>, ReplaySite> sites;
  std::vector<std::int8_t> plumbing(snapshot.strings.frames.size(), -1);
  for (const StackBytes& s : result.live_at_peak) {
    const TraceFrame* found = site_of(snapshot.strings, s.stack, plumbing);
    const TraceFrame frame = found != nullptr ? *found : TraceFrame{};
    ReplaySite& site = sites[{frame.filename, frame.line, frame.name}];
    site.frame = frame;
    site.bytes += s.bytes;
    site.count += s.count;
  }
  result.top_sites.clear();
  for (auto& [key, site] : sites) result.top_sites.push_back(std::move(site));
  std::stable_sort(result.top_sites.begin(), result.top_sites.end(),
                   [](const ReplaySite& a, const ReplaySite& b) {
                     return a.bytes != b.bytes ? a.bytes > b.bytes : a.count > b.count;
                   });
  if (result.top_sites.size() > top_sites) result.top_sites.resize(top_sites);
}

ReplayResult replay_trace(const TorchSnapshot& snapshot, std::int64_t device,
                          const ReplayOptions& options) {
  const ReplayPlan plan = build_replay_plan(snapshot, device);
  ReplayResult result = replay(plan, options);
  explain_with_trace(snapshot, plan, result, options.top_sites);
  return result;
}

}  // namespace memscope
