// PyTorch snapshot dict -> TorchSnapshot, with every field checked and named in errors.
//
// Speed matters (snapshots run to hundreds of MB), so the path of a value ("device_traces[0][17]
// .size") is a chain of stack frames rendered only when an error names it, each dict is walked
// once, and stacks are interned once per shared frame list: PyTorch writes one list per distinct
// traceback and references it from every event and block that has it (the pickle memo keeps it
// shared), so the list's identity is a cache key.
//
// The reader is written once over an Access (how to look at a value), for two kinds of values: a
// built PickleValue (read_torch_snapshot), and the pickle reader's own graph of Refs, read in place
// without building a PickleValue (read_torch_snapshot_pickle: half the work for a snapshot).
#include <string>
#include <unordered_map>
#include <utility>

#include "memscope/errors.hpp"
#include "memscope/trace.hpp"
#include "trace/pickle_machine.hpp"
#include "trace/pickle_run.hpp"

namespace memscope {
namespace {

// Access to a built PickleValue.
struct ValueAccess {
  using Node = PickleValue;
  using Items = std::vector<std::pair<Node, Node>>;

  [[nodiscard]] static PickleKind kind(const Node& v) noexcept { return v.kind(); }
  [[nodiscard]] static const Items* dict(const Node& v) noexcept {
    const auto* d = v.get_if<PickleDict>();
    return d != nullptr ? &d->items() : nullptr;
  }
  [[nodiscard]] static const std::vector<Node>* sequence(const Node& v) noexcept {
    if (const auto* l = v.get_if<PickleList>()) return &l->items();
    if (const auto* t = v.get_if<PickleTuple>()) return &t->items();
    return nullptr;
  }
  [[nodiscard]] static bool integer(const Node& v, std::int64_t& out) noexcept {
    const auto* i = v.get_if<std::int64_t>();
    if (i != nullptr) out = *i;
    return i != nullptr;
  }
  [[nodiscard]] static bool boolean(const Node& v, bool& out) noexcept {
    const auto* b = v.get_if<bool>();
    if (b != nullptr) out = *b;
    return b != nullptr;
  }
  [[nodiscard]] static const std::string* text(const Node& v) noexcept {
    return v.get_if<std::string>();
  }
  [[nodiscard]] static const std::string* big_integer(const Node& v) noexcept {
    const auto* b = v.get_if<PickleBigInt>();
    return b != nullptr ? &b->decimal : nullptr;
  }
};

// Access to the pickle reader's graph in place (valid while its machine lives).
struct RefAccess {
  using Node = detail::Ref;
  using Items = std::vector<std::pair<Node, Node>>;

  [[nodiscard]] static PickleKind kind(const Node& v) noexcept { return v.kind; }
  [[nodiscard]] const Items* dict(const Node& v) const noexcept {
    return v.kind == PickleKind::dict ? &machine->dict_items(v) : nullptr;
  }
  [[nodiscard]] const std::vector<Node>* sequence(const Node& v) const noexcept {
    const bool seq = v.kind == PickleKind::list || v.kind == PickleKind::tuple;
    return seq ? &machine->sequence_items(v) : nullptr;
  }
  [[nodiscard]] static bool integer(const Node& v, std::int64_t& out) noexcept {
    if (v.kind == PickleKind::integer) out = v.integer();
    return v.kind == PickleKind::integer;
  }
  [[nodiscard]] static bool boolean(const Node& v, bool& out) noexcept {
    if (v.kind == PickleKind::boolean) out = v.bits != 0;
    return v.kind == PickleKind::boolean;
  }
  [[nodiscard]] const std::string* text(const Node& v) const noexcept {
    return v.kind == PickleKind::string ? &machine->string_at(v) : nullptr;
  }
  [[nodiscard]] const std::string* big_integer(const Node& v) const noexcept {
    return v.kind == PickleKind::big_integer ? &machine->string_at(v) : nullptr;
  }

  const detail::PickleMachine* machine = nullptr;
};

// A place in the snapshot: a key under its parent, or an index into it.
struct Path {
  const Path* parent = nullptr;
  const char* key = nullptr;  // the root's name when parent is null
  std::size_t index = 0;      // used when key is null

  [[nodiscard]] Path operator/(const char* k) const { return Path{this, k, 0}; }
  [[nodiscard]] Path operator[](std::size_t i) const { return Path{this, nullptr, i}; }
  [[nodiscard]] std::string str() const {
    std::string out = parent != nullptr ? parent->str() : std::string();
    if (key == nullptr) return out + "[" + std::to_string(index) + "]";
    return parent != nullptr ? out + "." + key : std::string(key);
  }
};

// Typed access to the unpickled value; errors name the source and the path.
template <class A>
class Fields {
 public:
  using Node = typename A::Node;
  using Items = typename A::Items;

  Fields(std::string_view source, A access) : source_(source), a_(access) {}

  [[noreturn]] void fail(const Path& where, const std::string& problem) const {
    throw TraceFormatError(source_ + ": " + where.str() + ": " + problem);
  }
  [[noreturn]] void wrong_type(const Path& where, const char* expected, const Node& v) const {
    fail(where, std::string("expected ") + expected + ", found " + python_type_name(a_.kind(v)));
  }

  [[nodiscard]] const A& access() const noexcept { return a_; }
  const Items& dict(const Node& v, const Path& where) const {
    const Items* d = a_.dict(v);
    if (d == nullptr) wrong_type(where, "dict", v);
    return *d;
  }
  // A list or a tuple: PyTorch has written both over the versions.
  const std::vector<Node>& list(const Node& v, const Path& where) const {
    const std::vector<Node>* l = a_.sequence(v);
    if (l == nullptr) wrong_type(where, "list", v);
    return *l;
  }
  // The value under the str key `key`, or nullptr.
  const Node* find(const Items& d, std::string_view key) const noexcept {
    for (const auto& [k, v] : d) {
      const std::string* text = a_.text(k);
      if (text != nullptr && *text == key) return &v;
    }
    return nullptr;
  }
  const Node& field(const Items& d, const char* key, const Path& where) const {
    const Node* v = find(d, key);
    if (v == nullptr) fail(where, std::string("missing the field '") + key + "'");
    return *v;
  }
  std::int64_t integer(const Node& v, const Path& where) const {
    std::int64_t i = 0;
    if (a_.integer(v, i)) return i;
    if (const std::string* big = a_.big_integer(v)) {
      fail(where, "integer " + *big + " does not fit in 64 bits");
    }
    wrong_type(where, "int", v);
  }
  // An int that is only informative: one outside int64 (a frame line of 2^64 - 1, written by
  // PyTorch under Python 3.13 for a line it did not know) reads as `unknown`.
  std::int64_t integer_or(const Node& v, std::int64_t unknown, const Path& where) const {
    return a_.big_integer(v) != nullptr ? unknown : integer(v, where);
  }
  std::uint64_t natural(const Node& v, const Path& where) const {
    const std::int64_t i = integer(v, where);
    if (i < 0) fail(where, "expected a non-negative int, found " + std::to_string(i));
    return static_cast<std::uint64_t>(i);
  }
  bool boolean(const Node& v, const Path& where) const {
    bool b = false;
    if (!a_.boolean(v, b)) wrong_type(where, "bool", v);
    return b;
  }
  const std::string& text(const Node& v, const Path& where) const {
    const std::string* s = a_.text(v);
    if (s == nullptr) wrong_type(where, "str", v);
    return *s;
  }
  std::uint64_t natural(const Items& d, const char* key, const Path& where) const {
    return natural(field(d, key, where), where / key);
  }
  // An optional non-negative int field.
  std::uint64_t natural_or(const Items& d, const char* key, std::uint64_t fallback,
                           const Path& where) const {
    const Node* v = find(d, key);
    return v == nullptr ? fallback : natural(*v, where / key);
  }
  const std::string& text(const Items& d, const char* key, const Path& where) const {
    return text(field(d, key, where), where / key);
  }

 private:
  std::string source_;
  A a_;
};

// Reads frame lists into the snapshot's interned stacks, once per shared list.
template <class A>
class StackReader {
 public:
  using Node = typename A::Node;

  StackReader(const Fields<A>& f, TraceStrings& strings) : f_(f), strings_(strings) {}

  // The stack of a "frames" value (a list of {filename, line, name}, innermost first).
  StackId read(const Node& value, const Path& where) {
    const auto& frames = f_.list(value, where);
    if (frames.empty()) return 0;
    const auto [it, added] = by_list_.try_emplace(&frames, 0);
    if (!added) return it->second;
    ids_.clear();
    for (std::size_t i = 0; i < frames.size(); ++i) ids_.push_back(frame(frames[i], where[i]));
    it->second = strings_.intern_stack_ids(ids_);
    return it->second;
  }

 private:
  // A frame's index in the snapshot's frames; frame dicts are shared too (PyTorch writes each
  // distinct frame once), so they are read once.
  std::uint32_t frame(const Node& value, const Path& where) {
    const auto& d = f_.dict(value, where);
    const auto [it, added] = by_dict_.try_emplace(&d, 0);
    if (!added) return it->second;
    TraceFrame out;
    for (const auto& [k, v] : d) {  // PyTorch may add fields (fx_node_op...): skipped
      const std::string* key = f_.access().text(k);
      if (key == nullptr) continue;
      if (*key == "filename") {
        out.filename = f_.text(v, where / "filename");
      } else if (*key == "name") {
        out.name = f_.text(v, where / "name");
      } else if (*key == "line") {
        out.line = f_.integer_or(v, 0, where / "line");  // 0: unknown, as TraceFrame says
      }
    }
    it->second = strings_.intern_frame(out);
    return it->second;
  }

  const Fields<A>& f_;
  TraceStrings& strings_;
  std::unordered_map<const void*, StackId> by_list_;        // a list's items -> its stack
  std::unordered_map<const void*, std::uint32_t> by_dict_;  // a frame dict's items -> frame
  std::vector<std::uint32_t> ids_;
};

template <class A>
BlockState block_state(const Fields<A>& f, const std::string& state, const Path& where) {
  // PyTorch's docstring once said "active_awaiting_free"; its code writes active_pending_free.
  if (state == "active_awaiting_free") return BlockState::active_pending_free;
  for (const BlockState s :
       {BlockState::active_allocated, BlockState::active_pending_free, BlockState::inactive}) {
    if (state == to_string(s)) return s;
  }
  f.fail(where, "unknown block state '" + state +
                    "' (expected active_allocated, active_pending_free or inactive)");
}

template <class A>
TorchSegment read_segment(const Fields<A>& f, StackReader<A>& stacks, const typename A::Node& value,
                          const Path& where) {
  const auto& d = f.dict(value, where);
  TorchSegment seg;
  if (const auto* device = f.find(d, "device")) seg.device = f.integer(*device, where / "device");
  if (const auto* expandable = f.find(d, "is_expandable")) {
    seg.is_expandable = f.boolean(*expandable, where / "is_expandable");
  }
  SegmentInfo& s = seg.info;
  s.address = f.natural(d, "address", where);
  s.total_size = f.natural(d, "total_size", where);
  s.stream = f.natural_or(d, "stream", kDefaultStream, where);
  const std::string& type = f.text(d, "segment_type", where);
  if (type != "small" && type != "large") {
    f.fail(where / "segment_type", "expected 'small' or 'large', found '" + type + "'");
  }
  s.small_pool = type == "small";
  const Path blocks_where = where / "blocks";
  const auto& blocks = f.list(f.field(d, "blocks", where), blocks_where);
  std::uintptr_t next = s.address;  // blocks tile the segment; old snapshots omit addresses
  std::size_t allocated = 0, active = 0, requested = 0;
  bool any_stack = false;
  s.blocks.reserve(blocks.size());
  seg.block_stacks.reserve(blocks.size());
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const Path bw = blocks_where[i];
    const auto& bd = f.dict(blocks[i], bw);
    BlockInfo b;
    b.address = f.natural_or(bd, "address", next, bw);
    b.size = f.natural(bd, "size", bw);
    b.state = block_state(f, f.text(bd, "state", bw), bw / "state");
    b.requested_size = f.natural_or(bd, "requested_size", b.size, bw);
    if (b.state == BlockState::active_allocated) allocated += b.size;
    if (b.state != BlockState::inactive) {
      active += b.size;
      requested += b.requested_size;
    }
    next = b.address + b.size;
    s.blocks.push_back(b);
    const auto* frames = f.find(bd, "frames");
    const StackId stack = frames != nullptr ? stacks.read(*frames, bw / "frames") : 0;
    any_stack = any_stack || stack != 0;
    seg.block_stacks.push_back(stack);
  }
  if (!any_stack) seg.block_stacks.clear();  // "not recorded": the model's empty vector
  s.allocated_size = f.natural_or(d, "allocated_size", allocated, where);
  s.active_size = f.natural_or(d, "active_size", active, where);
  s.requested_size = f.natural_or(d, "requested_size", requested, where);
  return seg;
}

constexpr const char* kActionList =
    "alloc, free_requested, free_completed, segment_alloc, segment_free, segment_map, "
    "segment_unmap, snapshot, oom, annotate or empty_cache";

// One event dict, walked once. Required: action, size, and addr (device_free for oom, which
// PyTorch writes instead of addr). Optional: stream, time_us, frames, user_metadata and
// memscope's rounded_size.
template <class A>
TraceEvent read_event(const Fields<A>& f, StackReader<A>& stacks, TraceStrings& strings,
                      const typename A::Node& value, const Path& where) {
  using Node = typename A::Node;
  const auto& d = f.dict(value, where);
  TraceEvent e;
  const Node* action = nullptr;
  const Node* addr = nullptr;
  const Node* device_free = nullptr;
  const Node* size = nullptr;
  const Node* frames = nullptr;
  const Node* metadata = nullptr;
  for (const auto& [k, v] : d) {
    const std::string* key = f.access().text(k);
    if (key == nullptr) continue;
    const std::string_view name = *key;
    if (name == "action") {
      action = &v;
    } else if (name == "addr") {
      addr = &v;
    } else if (name == "size") {
      size = &v;
    } else if (name == "stream") {
      e.stream = f.natural(v, where / "stream");
    } else if (name == "time_us") {
      e.time_us = f.integer(v, where / "time_us");
    } else if (name == "frames") {
      frames = &v;
    } else if (name == "user_metadata") {
      metadata = &v;
    } else if (name == "device_free") {
      device_free = &v;
    } else if (name == "rounded_size") {  // memscope's own (write_torch_snapshot)
      e.rounded_size = f.natural(v, where / "rounded_size");
    }
  }
  if (action == nullptr) f.fail(where, "missing the field 'action'");
  const std::string& name = f.text(*action, where / "action");
  if (!parse_trace_action(name, e.action)) {
    f.fail(where / "action", "unknown action '" + name + "' (expected " + kActionList + ")");
  }
  if (size == nullptr) f.fail(where, "missing the field 'size'");
  e.size = f.natural(*size, where / "size");
  if (e.action == TraceAction::oom && addr == nullptr) {
    // The data model keeps the device's free bytes in addr; an oom without them says 0.
    if (device_free != nullptr) e.addr = f.natural(*device_free, where / "device_free");
  } else {
    if (addr == nullptr) f.fail(where, "missing the field 'addr'");
    e.addr = f.natural(*addr, where / "addr");
  }
  if (frames != nullptr) e.stack = stacks.read(*frames, where / "frames");
  if (metadata != nullptr) e.tag = strings.intern_tag(f.text(*metadata, where / "user_metadata"));
  return e;
}

// The configuration string in allocator_settings: memscope's writer keeps it under
// MEMSCOPE_ALLOC_CONF, PyTorch under PYTORCH_CUDA_ALLOC_CONF; a plain string is taken as is.
// Anything else there is not ours to judge.
template <class A>
std::string read_settings(const Fields<A>& f, const typename A::Node& value) {
  if (const std::string* s = f.access().text(value)) return *s;
  const auto* d = f.access().dict(value);
  if (d == nullptr) return {};
  for (const char* key : {"MEMSCOPE_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"}) {
    if (const auto* conf = f.find(*d, key)) {
      if (const std::string* s = f.access().text(*conf)) return *s;
    }
  }
  return {};
}

template <class A>
TorchSnapshot read_snapshot(const typename A::Node& root, std::string_view source, A access) {
  using Node = typename A::Node;
  const Fields<A> f(source, access);
  TorchSnapshot out;
  StackReader<A> stacks(f, out.strings);
  // Snapshots before PyTorch 2.1 were a bare list of segments.
  const Node* segments = &root;
  const Node* traces = nullptr;
  const Path top{nullptr, "the snapshot", 0};
  if (const auto* d = access.dict(root)) {
    segments = &f.field(*d, "segments", top);
    traces = f.find(*d, "device_traces");
    if (const Node* settings = f.find(*d, "allocator_settings")) {
      out.settings = read_settings(f, *settings);
    }
  } else if (access.kind(root) != PickleKind::list) {
    f.wrong_type(top, "dict", root);
  }
  const Path segs_where{nullptr, "segments", 0};
  const auto& segs = f.list(*segments, segs_where);
  out.segments.reserve(segs.size());
  for (std::size_t i = 0; i < segs.size(); ++i) {
    out.segments.push_back(read_segment(f, stacks, segs[i], segs_where[i]));
  }
  if (traces != nullptr) {
    const Path traces_where{nullptr, "device_traces", 0};
    const auto& devices = f.list(*traces, traces_where);
    out.device_traces.reserve(devices.size());
    for (std::size_t dev = 0; dev < devices.size(); ++dev) {
      const Path where = traces_where[dev];
      const auto& events = f.list(devices[dev], where);
      std::vector<TraceEvent>& trace = out.device_traces.emplace_back();
      trace.reserve(events.size());
      for (std::size_t i = 0; i < events.size(); ++i) {
        trace.push_back(read_event(f, stacks, out.strings, events[i], where[i]));
      }
    }
  }
  return out;
}

}  // namespace

TorchSnapshot read_torch_snapshot(const PickleValue& root, std::string_view source) {
  return read_snapshot(root, source, ValueAccess{});
}

TorchSnapshot read_torch_snapshot_pickle(std::string_view data, std::string_view source,
                                         const PickleLimits& limits) {
  TorchSnapshot out;
  detail::run_pickle(data, source, limits, [&](detail::PickleMachine& m, const detail::Ref& root) {
    m.check(root);  // build()'s bounds: cycles, depth, tree items
    out = read_snapshot(root, source, RefAccess{&m});
  });
  return out;
}

TorchSnapshot read_torch_snapshot_file(const std::filesystem::path& path) {
  return read_torch_snapshot_pickle(read_whole_file(path), path.string());
}

}  // namespace memscope
