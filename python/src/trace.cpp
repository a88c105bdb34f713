// memscope.Trace (a TorchSnapshot: PyTorch snapshots, JSON snapshots, RMM logs, recordings)
// and its replay through memscope's allocator on a simulated device; the results it gives are
// bound in replay_results.cpp. Every replay runs with the GIL released: a trace is a plain
// value, read only.
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "memscope/atomic_file.hpp"
#include "memscope/config.hpp"
#include "memscope/growth.hpp"
#include "memscope/oom.hpp"
#include "memscope/trace.hpp"

namespace memscope::python {
namespace {

// A size given as bytes (int) or as text ("24GiB"), as the rest of the package takes sizes.
std::size_t size_arg(const nb::handle& value, const char* what) {
  if (nb::isinstance<nb::str>(value)) {
    return parse_size_with_unit(nb::cast<std::string>(value), what);  // "24" is no size
  }
  if (nb::isinstance<nb::int_>(value) && !nb::isinstance<nb::bool_>(value)) {
    const auto bytes = nb::cast<std::int64_t>(value);
    if (bytes < 0) {
      throw nb::value_error((std::string(what) + ": a size cannot be negative").c_str());
    }
    return static_cast<std::size_t>(bytes);
  }
  throw nb::type_error(
      (std::string(what) + ": expected bytes (int) or a size such as \"24GiB\"").c_str());
}

ReplayOptions replay_options(const nb::handle& capacity, const std::string& config,
                             std::size_t top_sites, bool series = false) {
  ReplayOptions o;
  o.capacity = size_arg(capacity, "capacity");
  o.config = AllocatorConfig::parse(config);
  o.top_sites = top_sites;
  o.record_series = series;
  return o;
}

// An event as Trace.from_events takes it: (action, addr, size, stack id, tag id).
using EventTuple =
    std::tuple<std::string, std::uint64_t, std::uint64_t, std::uint32_t, std::uint32_t>;
// Frames' file and function names as str: a path that is not UTF-8 arrives with lone
// surrogates (Python's surrogateescape), which the trace keeps as the bytes they stand for.
using FrameTuple = std::tuple<nb::str, std::int64_t, nb::str>;

std::string fs_bytes(const nb::str& text) {
  nb::object bytes = nb::steal(PyUnicode_EncodeFSDefault(text.ptr()));
  if (!bytes.is_valid()) throw nb::python_error();
  return {PyBytes_AsString(bytes.ptr()), static_cast<std::size_t>(PyBytes_Size(bytes.ptr()))};
}

// A trace built from events produced in Python (memscope.estimate's capture): one device, no
// segments (the replay's starting live set then comes from the events alone, as for an RMM
// log). Every action name, stack id and tag id is checked before anything is built.
TorchSnapshot trace_from_events(const std::vector<EventTuple>& events,
                                const std::vector<std::string>& tags,
                                const std::vector<std::vector<FrameTuple>>& stacks,
                                std::int64_t device) {
  if (device < 0) throw nb::value_error("Trace.from_events: device cannot be negative");
  TorchSnapshot t;
  std::vector<TagId> tag_ids;
  tag_ids.reserve(tags.size());
  for (const std::string& tag : tags) tag_ids.push_back(t.strings.intern_tag(tag));
  std::vector<StackId> stack_ids;
  stack_ids.reserve(stacks.size());
  for (const auto& stack : stacks) {
    std::vector<TraceFrame> frames;
    frames.reserve(stack.size());
    for (const auto& [file, line, name] : stack) {
      frames.push_back({fs_bytes(file), line, fs_bytes(name)});
    }
    stack_ids.push_back(t.strings.intern_stack(frames));
  }
  t.device_traces.resize(static_cast<std::size_t>(device) + 1);
  auto& out = t.device_traces.back();
  out.reserve(events.size());
  for (std::size_t i = 0; i < events.size(); ++i) {
    const auto& [action, addr, size, stack, tag] = events[i];
    TraceEvent e;
    if (!parse_trace_action(action, e.action)) {
      throw nb::value_error(("Trace.from_events: event " + std::to_string(i) +
                             ": unknown action '" + action + "' (alloc, free_completed, ...)")
                                .c_str());
    }
    if ((stack != 0 && stack > stack_ids.size()) || (tag != 0 && tag > tag_ids.size())) {
      throw nb::value_error(("Trace.from_events: event " + std::to_string(i) +
                             ": stack or tag id out of range (ids count from 1 into `stacks` "
                             "and `tags`; 0 is none)")
                                .c_str());
    }
    e.addr = addr;
    e.size = size;
    e.stack = stack == 0 ? 0 : stack_ids[stack - 1];
    e.tag = tag == 0 ? 0 : tag_ids[tag - 1];
    e.time_us = static_cast<std::int64_t>(i);
    out.push_back(e);
  }
  return t;
}

std::string trace_repr(const TorchSnapshot& t) {
  std::size_t events = 0;
  for (const auto& d : t.device_traces) events += d.size();
  const std::size_t devices = trace_devices(t).size();
  return "<memscope.Trace: " + std::to_string(devices) +
         (devices == 1 ? " device, " : " devices, ") + std::to_string(events) + " events, " +
         std::to_string(t.segments.size()) + " segments>";
}

// Trace.replay, compare and fit: the trace through memscope's allocator, with the GIL released.
void def_replays(nb::class_<TorchSnapshot>& cls) {
  cls.def(
         "replay",
         [](const TorchSnapshot& t, const nb::handle& capacity, const std::string& config,
            const std::optional<std::int64_t>& device, std::size_t top_sites,
            bool series) -> nb::object {
           const ReplayOptions o = replay_options(capacity, config, top_sites, series);
           if (device) {
             ReplayResult r;
             {
               nb::gil_scoped_release unlocked;
               r = replay_trace(t, *device, o);
             }
             return nb::cast(std::move(r));
           }
           std::vector<ReplayResult> all;
           {
             nb::gil_scoped_release unlocked;
             for (const std::int64_t d : trace_devices(t)) all.push_back(replay_trace(t, d, o));
           }
           return nb::cast(std::move(all));
         },
         nb::arg("capacity") = "80GiB", nb::arg("config") = "", nb::arg("device") = 0,
         nb::arg("top_sites") = 10, nb::arg("series") = false,
         "Replays one device's trace (every device's, as a list, with device=None) on a "
         "simulated device of `capacity` with the allocator settings `config`; series=True "
         "keeps the bytes after every op (ReplayResult.series).")
      .def(
          "compare",
          [](const TorchSnapshot& t, const std::vector<std::string>& configs,
             const nb::handle& capacity, std::int64_t device, bool fit,
             const nb::handle& precision) {
            CompareOptions o;
            o.capacity = size_arg(capacity, "capacity");
            o.device = device;
            o.fit = fit;
            o.fit_precision = size_arg(precision, "precision");
            nb::gil_scoped_release unlocked;
            return compare_settings(t, configs, o);
          },
          nb::arg("configs"), nb::arg("capacity") = "80GiB", nb::arg("device") = 0,
          nb::arg("fit") = false, nb::arg("precision") = "2MiB",
          "Replays the trace once per settings string (\"\" is the defaults); with fit=True "
          "also searches each one's smallest device.")
      .def(
          "fit",
          [](const TorchSnapshot& t, const std::string& config, const nb::handle& precision,
             std::int64_t device, const nb::handle& max_capacity) {
            FitOptions o;
            o.config = AllocatorConfig::parse(config);
            o.precision = size_arg(precision, "precision");
            o.max_capacity = max_capacity.is_none() ? 0 : size_arg(max_capacity, "max_capacity");
            nb::gil_scoped_release unlocked;
            return fit_capacity(build_replay_plan(t, device), o);
          },
          nb::arg("config") = "", nb::arg("precision") = "2MiB", nb::arg("device") = 0,
          nb::arg("max_capacity") = nb::none(),
          "The smallest simulated device the trace replays on without an out-of-memory error, "
          "to `precision` (default: up to 4x the peak reserved on an unlimited device).");
}

}  // namespace

void bind_trace(nb::module_& m) {
  bind_replay_results(m);
  bind_oom(m);
  bind_growth(m);

  nb::class_<TorchSnapshot> cls(m, "Trace",
                                "A memory trace: segments at one moment and the events that led "
                                "there, per device (a PyTorch snapshot, an RMM log, a recording).");
  def_replays(cls);
  cls.def_prop_ro("devices", &trace_devices, "Devices with a trace of events.")
      .def_prop_ro(
          "events",
          [](const TorchSnapshot& t) {
            std::vector<std::size_t> out;
            for (const auto& d : t.device_traces) out.push_back(d.size());
            return out;
          },
          "Number of events per device index.")
      .def_prop_ro("segments", [](const TorchSnapshot& t) { return t.segments.size(); })
      .def_ro("dropped_events", &TorchSnapshot::dropped_events)
      .def_ro("settings", &TorchSnapshot::settings)
      .def("__repr__", &trace_repr)
      .def_static("from_events", &trace_from_events, nb::arg("events"),
                  nb::arg("tags") = std::vector<std::string>{},
                  nb::arg("stacks") = std::vector<std::vector<FrameTuple>>{}, nb::arg("device") = 0,
                  "A trace of one device from events (action, addr, size, stack, tag): action "
                  "as PyTorch names it (\"alloc\", \"free_completed\", ...), size in requested "
                  "bytes, stack and tag counting from 1 into `stacks` (frames (filename, line, "
                  "name), innermost first) and `tags` (0: none). No segments: the replay starts "
                  "from the live set the events imply. ValueError names a bad event.")
      .def(
          "save",
          [](const TorchSnapshot& t, const std::filesystem::path& path) {
            nb::gil_scoped_release unlocked;
            write_torch_snapshot(t, path);
          },
          nb::arg("path"),
          "Writes the trace as a PyTorch snapshot, atomically: JSON when the path ends in .json, "
          "else a protocol-4 pickle (what torch.cuda.memory._dump_snapshot writes).")
      .def(
          "to_pickle",
          [](const TorchSnapshot& t, int protocol) {
            const std::string bytes = torch_snapshot_pickle(t, protocol);
            return nb::bytes(bytes.data(), bytes.size());
          },
          nb::arg("protocol") = 4,
          "The snapshot as pickle bytes (protocol 2, 3 or 4; PyTorch's viewer cannot read 5).")
      .def("to_json", &torch_snapshot_json, "The snapshot as JSON text.")
      .def(
          "growth",
          [](const TorchSnapshot& t, std::int64_t device,
             const std::optional<std::vector<std::size_t>>& boundaries, std::size_t min_iterations,
             std::size_t top_sites) {
            GrowthOptions o;
            if (boundaries) o.boundaries = *boundaries;
            o.min_iterations = min_iterations;
            o.top_sites = top_sites;
            nb::gil_scoped_release unlocked;
            return analyze_growth(t, device, o);
          },
          nb::arg("device") = 0, nb::arg("boundaries") = nb::none(), nb::arg("min_iterations") = 3,
          nb::arg("top_sites") = 10,
          "Growth across iterations: which allocation sites keep memory from one iteration "
          "alive through the next ones. Iterations begin at `boundaries` (event indices), else "
          "where a tag's step number changes, else at the detected period of the allocations.")
      .def("ooms", &find_ooms, nb::arg("device") = 0,
           "Indices of the out-of-memory events ('oom' actions) in the device's trace.")
      .def(
          "explain_oom",
          [](const TorchSnapshot& t, std::int64_t device, std::size_t which,
             const nb::handle& capacity, std::size_t top_sites, bool counterfactuals,
             const std::string& source) {
            OomOptions o;
            o.which = which;
            o.capacity = capacity.is_none() ? 0 : size_arg(capacity, "capacity");
            o.top_sites = top_sites;
            o.counterfactuals = counterfactuals;
            o.source = source;
            nb::gil_scoped_release unlocked;
            return explain_oom(t, device, o);
          },
          nb::arg("device") = 0, nb::arg("which") = 0, nb::arg("capacity") = nb::none(),
          nb::arg("top_sites") = 10, nb::arg("counterfactuals") = true,
          nb::arg("source") = "<trace>",
          "Explains the device's out-of-memory event number `which` (0: the first): the "
          "allocator's state, what was live, and whether expandable segments, a max split size "
          "or a garbage collection threshold would have fitted on a simulated device of "
          "`capacity` (default: reserved + the device's free bytes at the OOM). "
          "TraceFormatError names a missing or damaged OOM record.");

  m.def(
      "_config_without_limit",
      [](const std::string& config) {
        AllocatorConfig parsed = AllocatorConfig::parse(config);
        parsed.memory_limit_bytes = 0;
        parsed.memory_fraction = 1.0;
        return parsed.to_string();
      },
      nb::arg("config"),
      "`config` (MEMSCOPE_ALLOC_CONF syntax) without its memory_limit, as canonical text: the "
      "settings of a replay that finds what a trace needs. ConfigError names a bad setting.");
  m.def(
      "_write_file_atomically",
      [](const std::filesystem::path& path, const nb::bytes& content) {
        const std::string bytes(content.c_str(), content.size());
        nb::gil_scoped_release unlocked;
        write_file_atomically(path, bytes);
      },
      nb::arg("path"), nb::arg("content"),
      "Writes `content` to `path` as every memscope output is written (atomic_file.hpp): a "
      "regular file through a temporary file renamed over it, keeping its permissions; "
      "/dev/null, a FIFO and the like in place. BackendError names the file on failure.");
  m.def(
      "load_trace",
      [](const std::filesystem::path& path) {
        nb::gil_scoped_release unlocked;
        return read_trace_file(path);
      },
      nb::arg("path"),
      "Reads a trace: a PyTorch snapshot (pickle or JSON) or an RMM log, told apart by content. "
      "Raises TraceFormatError naming the file for anything else.");
}

}  // namespace memscope::python
