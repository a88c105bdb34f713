// The data of a memory trace: what an allocator did, event by event, and the segments it held
// at one moment, in the shape of PyTorch's memory snapshot (torch.cuda.memory._snapshot()).
//
// One model for every producer and consumer: the allocator's recorder fills it, the readers
// (PyTorch snapshot pickles and JSON, RMM allocation logs) fill it, the writers and the replay
// read it. It lives at the allocator's level (not in the trace layer) because the allocator
// records into it; it depends on nothing but the snapshot types.
//
// Stack frames and tags are interned once per snapshot (PyTorch snapshots share frames too):
// an event or a block names its stack by a StackId into TraceStrings::stacks and its tag (the
// tracker's stage, PyTorch's user_metadata) by a TagId into TraceStrings::tags. Id 0 is always
// "none" (an empty stack, an empty tag), so a default-constructed event has neither.
//
// Thread safety: plain values; copy them, keep them, read them from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "memscope/backend.hpp"
#include "memscope/snapshot.hpp"

namespace memscope {

enum class TraceAction {
  alloc,           // a block handed out; size is the requested size (not rounded)
  free_requested,  // the caller freed it; it may still wait for streams
  free_completed,  // the block is back in the cache: the free to replay
  segment_alloc,   // a segment reserved from the backend (cudaMalloc)
  segment_free,    // a segment released to the backend (cudaFree)
  segment_map,     // expandable segments: pages mapped
  segment_unmap,   // expandable segments: pages unmapped
  snapshot,        // a snapshot was taken here
  oom,             // an out-of-memory error: size is the request, addr the device's free bytes
  empty_cache,     // memscope only: empty_cache() was called (size: bytes it released)
  annotate,        // PyTorch's _annotate_tensor: addr is the allocation, the tag its annotation
};
// The action's name as PyTorch writes it ("free_completed"; memscope's own: "empty_cache").
[[nodiscard]] const char* to_string(TraceAction action) noexcept;
// The action named `name`, or false when no action has that name.
[[nodiscard]] bool parse_trace_action(std::string_view name, TraceAction& out) noexcept;

using StackId = std::uint32_t;  // index into TraceStrings::stacks; 0 = no stack
using TagId = std::uint32_t;    // index into TraceStrings::tags; 0 = no tag

struct TraceFrame {
  std::string filename;   // source file, or the shared object for an unsymbolized C++ frame
  std::int64_t line = 0;  // 0 when unknown
  std::string name;       // function
  friend bool operator==(const TraceFrame&, const TraceFrame&) = default;
};

struct TraceEvent {
  TraceAction action = TraceAction::alloc;
  std::uint64_t addr = 0;
  std::uint64_t size = 0;          // PyTorch's `size`: requested bytes for alloc and frees,
                                   // segment bytes for segment events
  std::uint64_t rounded_size = 0;  // the block's rounded size; 0 when the source does not say
  StreamId stream = kDefaultStream;
  std::int64_t time_us = 0;  // 0 when the source records no time
  StackId stack = 0;
  TagId tag = 0;
};

// The interned frames, stacks and tags of one snapshot.
struct TraceStrings {
  std::vector<TraceFrame> frames;
  std::vector<std::vector<std::uint32_t>> stacks{{}};  // frame indices, innermost first
  std::vector<std::string> tags{std::string()};

  // The id of this stack (frames innermost first) or tag, adding it when new. O(frames) with
  // hashing; equal stacks and tags get equal ids.
  [[nodiscard]] StackId intern_stack(const std::vector<TraceFrame>& stack);
  // The same in two steps, for readers that meet each frame many times: the index of a frame in
  // `frames` (added when new), and the id of a stack of such indices (each < frames.size()).
  [[nodiscard]] std::uint32_t intern_frame(const TraceFrame& frame);
  [[nodiscard]] StackId intern_stack_ids(const std::vector<std::uint32_t>& frame_ids);
  [[nodiscard]] TagId intern_tag(std::string_view tag);
  // The frames of a stack, innermost first (empty for 0 or an id out of range).
  [[nodiscard]] std::vector<TraceFrame> stack_frames(StackId id) const;

 private:
  std::unordered_map<std::string, std::uint32_t> frame_index_;  // keyed by an encoding
  std::unordered_map<std::string, StackId> stack_index_;
  std::unordered_map<std::string, TagId> tag_index_;
};

struct TorchSegment {
  std::int64_t device = 0;
  SegmentInfo info;  // address, sizes, stream, pool ("small"/"large") and blocks
  // The stack that allocated each block, parallel to info.blocks (empty when not recorded).
  std::vector<StackId> block_stacks;
  bool is_expandable = false;
};

// A PyTorch-shaped memory snapshot: segments at one moment plus, when recorded, the events
// that led there, per device.
struct TorchSnapshot {
  std::vector<TorchSegment> segments;
  std::vector<std::vector<TraceEvent>> device_traces;  // index = device; recording order
  TraceStrings strings;
  std::uint64_t dropped_events = 0;  // events the recorder's ring buffer overwrote
  std::string settings;              // the allocator's settings, when known
};

}  // namespace memscope
