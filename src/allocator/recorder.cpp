// The allocator's event log (recorder.hpp).
#include "allocator/recorder.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>

#include "allocator/event_clock.hpp"
#include "allocator/stack_capture.hpp"
#include "memscope/errors.hpp"

namespace memscope::detail {
namespace {

constexpr std::size_t kMaxPythonFrames = 64;

std::atomic<PythonStackCollector> g_python_collector{nullptr};

template <class T>
void append_bytes(std::string& key, const T* data, std::size_t n) {
  key.append(reinterpret_cast<const char*>(data), n * sizeof(T));
}

}  // namespace
}  // namespace memscope::detail

namespace memscope {

void set_python_stack_collector(PythonStackCollector collector) noexcept {
  detail::g_python_collector.store(collector, std::memory_order_release);
}

PythonStackCollector python_stack_collector() noexcept {
  return detail::g_python_collector.load(std::memory_order_acquire);
}

}  // namespace memscope

namespace memscope::detail {

Recorder::Recorder(const RecordingOptions& options) : options_(options) {
  if (options.max_entries == 0) {
    throw UsageError(
        "start_recording: max_entries must be at least 1 (it is the number of events kept); "
        "call stop_recording() to record nothing");
  }
  if (options.cpp_stacks) warm_up_stack_capture();
}

void Recorder::push(const RawEvent& event) noexcept {
  if (events_.size() < options_.max_entries) {
    try {
      events_.push_back(event);
    } catch (...) {  // no memory for a longer log: this event is lost, and said to be
      ++dropped_;
    }
    return;
  }
  events_[next_] = event;  // the ring is full: the oldest event goes
  next_ = next_ + 1 == events_.size() ? 0 : next_ + 1;
  ++dropped_;
}

void Recorder::record(TraceAction action, std::uint64_t addr, std::uint64_t size,
                      std::uint64_t rounded, StreamId stream) noexcept {
  if (!active_) return;
  push({addr, size, rounded, EventClock::ticks(), stream, current_trace_tag(), 0, action});
}

void Recorder::record_alloc(std::uint64_t addr, std::uint64_t size, std::uint64_t rounded,
                            StreamId stream, std::uintptr_t caller) noexcept {
  if (!active_) return;
  const std::uint32_t stack = capture_stack(caller);
  if (stack != 0) {
    try {
      live_stacks_[addr] = stack;
    } catch (...) {  // NOLINT(bugprone-empty-catch): the block's stack is just not shown
    }
  }
  push({addr, size, rounded, EventClock::ticks(), stream, current_trace_tag(), stack,
        TraceAction::alloc});
}

void Recorder::record_free(std::uint64_t addr, std::uint64_t size, std::uint64_t rounded,
                           StreamId stream, bool completed) noexcept {
  if (completed && !live_stacks_.empty()) live_stacks_.erase(addr);
  if (!active_) return;
  const std::int64_t t = EventClock::ticks();
  const TraceTag tag = current_trace_tag();
  push({addr, size, rounded, t, stream, tag, 0, TraceAction::free_requested});
  if (completed) push({addr, size, rounded, t, stream, tag, 0, TraceAction::free_completed});
}

void Recorder::record_completed(std::uint64_t addr, std::uint64_t size, std::uint64_t rounded,
                                StreamId stream) noexcept {
  if (!live_stacks_.empty()) live_stacks_.erase(addr);
  record(TraceAction::free_completed, addr, size, rounded, stream);
}

std::uint32_t Recorder::capture_stack(std::uintptr_t caller) noexcept {
  if (!options_.cpp_stacks && !options_.python_stacks) return 0;
  std::array<std::uintptr_t, kMaxCppFrames> pcs{};
  std::array<PythonFrame, kMaxPythonFrames> python{};
  std::size_t n_pcs = 0;
  std::size_t n_python = 0;
  if (options_.cpp_stacks) n_pcs = capture_cpp_stack(pcs.data(), pcs.size(), caller);
  if (options_.python_stacks) {
    if (const PythonStackCollector collect = python_stack_collector()) {
      n_python = std::min(collect(python.data(), python.size()), python.size());
    }
  }
  if (n_pcs == 0 && n_python == 0) return 0;
  try {
    key_.clear();
    append_bytes(key_, &n_pcs, 1);
    append_bytes(key_, pcs.data(), n_pcs);
    append_bytes(key_, python.data(), n_python);  // pointers and lines: PythonFrame is plain
    if (const auto it = stack_ids_.find(key_); it != stack_ids_.end()) return it->second;
    const auto id = static_cast<std::uint32_t>(stacks_.size());
    stacks_.push_back({{pcs.begin(), pcs.begin() + static_cast<std::ptrdiff_t>(n_pcs)},
                       {python.begin(), python.begin() + static_cast<std::ptrdiff_t>(n_python)}});
    try {
      stack_ids_.emplace(key_, id);
    } catch (...) {
      stacks_.pop_back();
      throw;
    }
    return id;
  } catch (...) {  // no memory: this allocation goes without its stack
    return 0;
  }
}

void Recorder::export_to(TorchSnapshot& out) const {
  // Raw stack -> interned stack of `out`, symbolizing each return address once.
  std::unordered_map<std::uintptr_t, TraceFrame> symbols;
  std::vector<StackId> stack_map(stacks_.size(), 0);
  for (std::size_t i = 1; i < stacks_.size(); ++i) {
    std::vector<TraceFrame> frames;
    frames.reserve(stacks_[i].pcs.size() + stacks_[i].python.size());
    for (const std::uintptr_t pc : stacks_[i].pcs) {
      auto it = symbols.find(pc);
      if (it == symbols.end()) it = symbols.emplace(pc, symbolize(pc)).first;
      frames.push_back(it->second);
    }
    for (const PythonFrame& f : stacks_[i].python) {
      frames.push_back(
          {f.filename != nullptr ? f.filename : "", f.line, f.name != nullptr ? f.name : ""});
    }
    stack_map[i] = out.strings.intern_stack(frames);
  }
  std::unordered_map<TraceTag, TagId> tag_map;
  const auto tag_id = [&](TraceTag tag) -> TagId {
    if (tag == nullptr) return 0;
    auto it = tag_map.find(tag);
    if (it == tag_map.end()) it = tag_map.emplace(tag, out.strings.intern_tag(*tag)).first;
    return it->second;
  };
  if (out.device_traces.empty()) out.device_traces.resize(1);
  std::vector<TraceEvent>& trace = out.device_traces[0];
  const EventClock::ToMicroseconds to_us(clock_);
  trace.reserve(trace.size() + events_.size());
  for (std::size_t k = 0; k < events_.size(); ++k) {
    const RawEvent& e = events_[(next_ + k) % events_.size()];  // oldest first
    trace.push_back({e.action, e.addr, e.size, e.rounded, e.stream, to_us(e.ticks),
                     stack_map[e.stack], tag_id(e.tag)});
  }
  out.dropped_events += dropped_;
  if (!options_.cpp_stacks && !options_.python_stacks) return;
  for (TorchSegment& segment : out.segments) {
    segment.block_stacks.assign(segment.info.blocks.size(), 0);
    for (std::size_t b = 0; b < segment.info.blocks.size(); ++b) {
      const BlockInfo& block = segment.info.blocks[b];
      if (block.state == BlockState::inactive) continue;
      if (const auto it = live_stacks_.find(block.address); it != live_stacks_.end()) {
        segment.block_stacks[b] = stack_map[it->second];
      }
    }
  }
}

}  // namespace memscope::detail
