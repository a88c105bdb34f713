// PyTorch snapshot dict -> TorchSnapshot, with every field checked and named in errors.
#include <array>
#include <string>
#include <utility>

#include "memscope/errors.hpp"
#include "memscope/trace.hpp"

namespace memscope {
namespace {

// Typed access to the unpickled value; `where` is the path of the value ("segments[3].blocks").
class Fields {
 public:
  explicit Fields(std::string_view source) : source_(source) {}

  [[noreturn]] void fail(const std::string& where, const std::string& problem) const {
    throw TraceFormatError(source_ + ": " + where + ": " + problem);
  }
  [[noreturn]] void wrong_type(const std::string& where, const char* expected,
                               const PickleValue& v) const {
    fail(where, std::string("expected ") + expected + ", found " + std::string(v.type_name()));
  }

  const PickleDict& dict(const PickleValue& v, const std::string& where) const {
    const auto* d = v.get_if<PickleDict>();
    if (d == nullptr) wrong_type(where, "dict", v);
    return *d;
  }
  // A list or a tuple: PyTorch has written both over the versions.
  const std::vector<PickleValue>& list(const PickleValue& v, const std::string& where) const {
    if (const auto* l = v.get_if<PickleList>()) return l->items();
    if (const auto* t = v.get_if<PickleTuple>()) return t->items();
    wrong_type(where, "list", v);
  }
  const PickleValue& field(const PickleDict& d, const char* key, const std::string& where) const {
    const PickleValue* v = d.find(key);
    if (v == nullptr) fail(where, std::string("missing the field '") + key + "'");
    return *v;
  }
  std::int64_t integer(const PickleValue& v, const std::string& where) const {
    const auto* i = v.get_if<std::int64_t>();
    if (i == nullptr) wrong_type(where, "int", v);
    return *i;
  }
  std::uint64_t natural(const PickleValue& v, const std::string& where) const {
    const std::int64_t i = integer(v, where);
    if (i < 0) fail(where, "expected a non-negative int, found " + std::to_string(i));
    return static_cast<std::uint64_t>(i);
  }
  std::uint64_t natural(const PickleDict& d, const char* key, const std::string& where) const {
    return natural(field(d, key, where), where + "." + key);
  }
  // An optional non-negative int field.
  std::uint64_t natural_or(const PickleDict& d, const char* key, std::uint64_t fallback,
                           const std::string& where) const {
    const PickleValue* v = d.find(key);
    return v == nullptr ? fallback : natural(*v, where + "." + key);
  }
  const std::string& text(const PickleDict& d, const char* key, const std::string& where) const {
    const PickleValue& v = field(d, key, where);
    const auto* s = v.get_if<std::string>();
    if (s == nullptr) wrong_type(where + "." + key, "str", v);
    return *s;
  }

 private:
  std::string source_;
};

BlockState block_state(const Fields& f, const std::string& state, const std::string& where) {
  for (const BlockState s :
       {BlockState::active_allocated, BlockState::active_pending_free, BlockState::inactive}) {
    if (state == to_string(s)) return s;
  }
  f.fail(where + ".state", "unknown block state '" + state +
                               "' (expected active_allocated, active_pending_free or inactive)");
}

TorchSegment read_segment(const Fields& f, const PickleValue& value, const std::string& where) {
  const PickleDict& d = f.dict(value, where);
  TorchSegment seg;
  seg.device = d.find("device") != nullptr ? f.integer(*d.find("device"), where + ".device") : 0;
  SegmentInfo& s = seg.info;
  s.address = f.natural(d, "address", where);
  s.total_size = f.natural(d, "total_size", where);
  s.stream = f.natural_or(d, "stream", kDefaultStream, where);
  const std::string& type = f.text(d, "segment_type", where);
  if (type != "small" && type != "large") {
    f.fail(where + ".segment_type", "expected 'small' or 'large', found '" + type + "'");
  }
  s.small_pool = type == "small";
  const std::string blocks_where = where + ".blocks";
  const auto& blocks = f.list(f.field(d, "blocks", where), blocks_where);
  std::uintptr_t next = s.address;  // blocks tile the segment; old snapshots omit addresses
  std::size_t allocated = 0, active = 0, requested = 0;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const std::string bw = blocks_where + "[" + std::to_string(i) + "]";
    const PickleDict& bd = f.dict(blocks[i], bw);
    BlockInfo b;
    b.address = f.natural_or(bd, "address", next, bw);
    b.size = f.natural(bd, "size", bw);
    b.state = block_state(f, f.text(bd, "state", bw), bw);
    b.requested_size = f.natural_or(bd, "requested_size", b.size, bw);
    if (b.state == BlockState::active_allocated) allocated += b.size;
    if (b.state != BlockState::inactive) {
      active += b.size;
      requested += b.requested_size;
    }
    next = b.address + b.size;
    s.blocks.push_back(b);
  }
  s.allocated_size = f.natural_or(d, "allocated_size", allocated, where);
  s.active_size = f.natural_or(d, "active_size", active, where);
  s.requested_size = f.natural_or(d, "requested_size", requested, where);
  return seg;
}

TraceEvent read_event(const Fields& f, const PickleValue& value, const std::string& where) {
  const PickleDict& d = f.dict(value, where);
  TraceEvent e;
  const std::string& action = f.text(d, "action", where);
  if (!parse_trace_action(action, e.action)) {
    f.fail(where + ".action", "unknown action '" + action +
                                  "' (expected alloc, free_requested, free_completed, "
                                  "segment_alloc, segment_free, segment_map, segment_unmap, "
                                  "snapshot or oom)");
  }
  e.addr = f.natural(d, "addr", where);
  e.size = f.natural(d, "size", where);
  e.stream = f.natural_or(d, "stream", kDefaultStream, where);
  const PickleValue* time = d.find("time_us");
  e.time_us = time != nullptr ? f.integer(*time, where + ".time_us") : 0;
  return e;
}

}  // namespace

TorchSnapshot read_torch_snapshot(const PickleValue& root, std::string_view source) {
  const Fields f(source);
  TorchSnapshot out;
  // Snapshots before PyTorch 2.1 were a bare list of segments.
  const PickleValue* segments = &root;
  const PickleValue* traces = nullptr;
  if (const auto* d = root.get_if<PickleDict>()) {
    segments = &f.field(*d, "segments", "the snapshot");
    traces = d->find("device_traces");
  } else if (root.get_if<PickleList>() == nullptr) {
    f.wrong_type("the snapshot", "dict", root);
  }
  const auto& segs = f.list(*segments, "segments");
  out.segments.reserve(segs.size());
  for (std::size_t i = 0; i < segs.size(); ++i) {
    out.segments.push_back(read_segment(f, segs[i], "segments[" + std::to_string(i) + "]"));
  }
  if (traces != nullptr) {
    const auto& devices = f.list(*traces, "device_traces");
    for (std::size_t dev = 0; dev < devices.size(); ++dev) {
      const std::string where = "device_traces[" + std::to_string(dev) + "]";
      const auto& events = f.list(devices[dev], where);
      std::vector<TraceEvent>& trace = out.device_traces.emplace_back();
      trace.reserve(events.size());
      for (std::size_t i = 0; i < events.size(); ++i) {
        trace.push_back(read_event(f, events[i], where + "[" + std::to_string(i) + "]"));
      }
    }
  }
  return out;
}

TorchSnapshot read_torch_snapshot_file(const std::filesystem::path& path) {
  return read_torch_snapshot(read_pickle_file(path), path.string());
}

}  // namespace memscope
