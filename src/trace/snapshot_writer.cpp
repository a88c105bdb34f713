// TorchSnapshot -> what torch.cuda.memory._snapshot() returns, as a pickle (the bytes Python's
// pickle.dumps writes for that dict) or as JSON, and the atomic file write.
//
// One walk of the snapshot (emit_snapshot) serves both formats through a sink, so the fields and
// their order are stated once. Frames and stacks are written once and shared (the pickle memo);
// JSON, which cannot share, repeats them.
//
// What the viewer gets beyond PyTorch's fields, checked against torch/cuda/_memory_viz.py and
// MemoryViz.js, which ignore keys they do not know and pass over actions they do not know:
// events keep memscope's "rounded_size" (when known) and memscope's "empty_cache" action; the
// tag is PyTorch's "user_metadata"; "allocator_settings" holds {"MEMSCOPE_ALLOC_CONF": ...}.
#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "common/atomic_file.hpp"
#include "memscope/errors.hpp"
#include "memscope/trace.hpp"
#include "trace/json_writer.hpp"
#include "trace/pickle_writer.hpp"

namespace memscope {
namespace {

constexpr unsigned kFrames = 0;  // kinds of shared containers: a frame dict, a stack list
constexpr unsigned kStacks = 1;
constexpr std::int64_t kMaxDevices = 1 << 16;  // device_traces gets one list per device

template <class Sink>
class SnapshotEmitter {
 public:
  SnapshotEmitter(const TorchSnapshot& snapshot, Sink& out) : s_(snapshot), out_(out) {}

  void snapshot() {
    const bool settings = !s_.settings.empty();
    out_.begin_dict(settings ? 3 : 2);
    out_.literal("segments");
    out_.begin_list(s_.segments.size());
    for (std::size_t i = 0; i < s_.segments.size(); ++i) segment(i);
    out_.literal("device_traces");
    const std::size_t devices = device_count();
    out_.begin_list(devices);
    for (std::size_t d = 0; d < devices; ++d) {
      const std::size_t n = d < s_.device_traces.size() ? s_.device_traces[d].size() : 0;
      out_.begin_list(n);
      for (std::size_t i = 0; i < n; ++i) event(d, i);
    }
    if (settings) {
      out_.literal("allocator_settings");
      out_.begin_dict(1);
      text("MEMSCOPE_ALLOC_CONF", s_.settings);
    }
  }

 private:
  [[noreturn]] static void fail(const std::string& where, const std::string& problem) {
    throw UsageError("writing a snapshot: " + where + ": " + problem);
  }

  // The viewer indexes device_traces by each segment's device: one list per device up to the
  // highest, empty where nothing was recorded.
  std::size_t device_count() const {
    std::int64_t highest = static_cast<std::int64_t>(s_.device_traces.size()) - 1;
    for (std::size_t i = 0; i < s_.segments.size(); ++i) {
      const std::int64_t d = s_.segments[i].device;
      if (d < 0 || d >= kMaxDevices) {
        fail("segments[" + std::to_string(i) + "].device",
             std::to_string(d) + " is not a device number (0 to 65535)");
      }
      highest = std::max(highest, d);
    }
    return static_cast<std::size_t>(highest + 1);
  }

  // `where()` names the referring field in an error; built only then.
  template <class Where>
  void frames(StackId id, const Where& where) {
    if (out_.fetch(kStacks, id)) return;
    if (id >= s_.strings.stacks.size()) {
      fail(where(), "stack " + std::to_string(id) + " is not in the snapshot's " +
                        std::to_string(s_.strings.stacks.size()) + " stacks");
    }
    const std::vector<std::uint32_t>& stack = s_.strings.stacks[id];
    out_.share(kStacks, id);
    out_.begin_list(stack.size());
    for (const std::uint32_t f : stack) {
      if (out_.fetch(kFrames, f)) continue;
      if (f >= s_.strings.frames.size()) {
        fail(where(), "stack " + std::to_string(id) + " names frame " + std::to_string(f) + " of " +
                          std::to_string(s_.strings.frames.size()));
      }
      const TraceFrame& frame = s_.strings.frames[f];
      out_.share(kFrames, f);
      out_.begin_dict(3);  // in torch's order
      text("name", frame.name);
      text("filename", frame.filename);
      integer("line", frame.line);
    }
  }

  void segment(std::size_t index) {
    const TorchSegment& seg = s_.segments[index];
    const SegmentInfo& info = seg.info;
    const auto where = [index] { return "segments[" + std::to_string(index) + "]"; };
    out_.begin_dict(12);
    integer("device", seg.device);
    natural("address", info.address);
    natural("total_size", info.total_size);
    natural("allocated_size", info.allocated_size);
    natural("active_size", info.active_size);
    natural("requested_size", info.requested_size);
    natural("stream", info.stream);
    literal("segment_type", info.small_pool ? "small" : "large");
    out_.literal("segment_pool_id");
    out_.pair(0, 0);
    out_.literal("is_expandable");
    out_.boolean(seg.is_expandable);
    out_.literal("frames");
    frames(0, [&] { return where() + ".frames"; });
    out_.literal("blocks");
    out_.begin_list(info.blocks.size());
    for (std::size_t b = 0; b < info.blocks.size(); ++b) {
      const BlockInfo& block = info.blocks[b];
      out_.begin_dict(5);
      natural("address", block.address);
      natural("size", block.size);
      natural("requested_size", block.requested_size);
      literal("state", to_string(block.state));
      out_.literal("frames");
      const StackId stack = b < seg.block_stacks.size() ? seg.block_stacks[b] : 0;
      frames(stack, [&] { return where() + ".blocks[" + std::to_string(b) + "]"; });
    }
  }

  void event(std::size_t device, std::size_t index) {
    const TraceEvent& e = s_.device_traces[device][index];
    const auto where = [device, index] {
      return "device_traces[" + std::to_string(device) + "][" + std::to_string(index) + "]";
    };
    if (e.tag >= s_.strings.tags.size()) {
      fail(where() + ".tag", "tag " + std::to_string(e.tag) + " is not in the snapshot's " +
                                 std::to_string(s_.strings.tags.size()) + " tags");
    }
    const bool rounded = e.rounded_size != 0;
    const bool tagged = e.tag != 0;
    out_.begin_dict(std::size_t{6} + (rounded ? 1U : 0U) + (tagged ? 1U : 0U));
    literal("action", to_string(e.action));
    // PyTorch names an OOM event's addr field device_free (the bytes the device had free).
    out_.literal(e.action == TraceAction::oom ? "device_free" : "addr");
    out_.natural(e.addr);
    natural("size", e.size);
    natural("stream", e.stream);
    integer("time_us", e.time_us);
    if (tagged) text("user_metadata", s_.strings.tags[e.tag]);  // torch's place for it
    out_.literal("frames");
    frames(e.stack, [&] { return where() + ".stack"; });
    if (rounded) natural("rounded_size", e.rounded_size);
  }

  void text(const char* key, std::string_view value) {
    out_.literal(key);
    out_.text(value);
  }
  void literal(const char* key, const char* value) {
    out_.literal(key);
    out_.literal(value);
  }
  void natural(const char* key, std::uint64_t value) {
    out_.literal(key);
    out_.natural(value);
  }
  void integer(const char* key, std::int64_t value) {
    out_.literal(key);
    out_.integer(value);
  }

  const TorchSnapshot& s_;
  Sink& out_;
};

// About the size of the pickle, to reserve it at once rather than regrow a large string.
std::size_t snapshot_bytes(const TorchSnapshot& snapshot) {
  std::size_t bytes = 4096;
  for (const auto& trace : snapshot.device_traces) bytes += 64 * trace.size();
  for (const auto& seg : snapshot.segments) bytes += 48 * seg.info.blocks.size();
  return bytes;
}

bool has_json_extension(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".json";
}

}  // namespace

std::string torch_snapshot_pickle(const TorchSnapshot& snapshot, int protocol) {
  detail::PickleWriter out(protocol);
  out.reserve(snapshot_bytes(snapshot));
  SnapshotEmitter<detail::PickleWriter>(snapshot, out).snapshot();
  return out.finish();
}

std::string torch_snapshot_json(const TorchSnapshot& snapshot) {
  detail::JsonWriter out;
  out.reserve(snapshot_bytes(snapshot) * 8);  // JSON repeats the frames the pickle shares
  SnapshotEmitter<detail::JsonWriter>(snapshot, out).snapshot();
  return out.finish();
}

void write_torch_snapshot(const TorchSnapshot& snapshot, const std::filesystem::path& path) {
  if (path.empty() || !path.has_filename()) {
    throw UsageError("write_torch_snapshot: '" + path.string() +
                     "' names no file: give a path such as snapshot.pickle or snapshot.json");
  }
  const std::string bytes =
      has_json_extension(path) ? torch_snapshot_json(snapshot) : torch_snapshot_pickle(snapshot, 4);
  detail::write_file_atomically(path, bytes);
}

}  // namespace memscope
