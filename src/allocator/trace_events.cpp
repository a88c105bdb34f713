// Names of trace actions and the interning of frames, stacks and tags (trace_events.hpp).
#include "memscope/trace_events.hpp"

#include <array>
#include <utility>

namespace memscope {
namespace {

constexpr std::array<std::pair<TraceAction, const char*>, 11> kActions{{
    {TraceAction::alloc, "alloc"},
    {TraceAction::free_requested, "free_requested"},
    {TraceAction::free_completed, "free_completed"},
    {TraceAction::segment_alloc, "segment_alloc"},
    {TraceAction::segment_free, "segment_free"},
    {TraceAction::segment_map, "segment_map"},
    {TraceAction::segment_unmap, "segment_unmap"},
    {TraceAction::snapshot, "snapshot"},
    {TraceAction::oom, "oom"},
    {TraceAction::empty_cache, "empty_cache"},
    {TraceAction::annotate, "annotate"},
}};

// A key that no two different frames share: the fields with their lengths.
std::string frame_key(const TraceFrame& f) {
  std::string key = std::to_string(f.filename.size());
  key += ':';
  key += f.filename;
  key += std::to_string(f.line);
  key += ':';
  key += f.name;
  return key;
}

}  // namespace

const char* to_string(TraceAction action) noexcept {
  for (const auto& [a, name] : kActions) {
    if (a == action) return name;
  }
  return "?";
}

bool parse_trace_action(std::string_view name, TraceAction& out) noexcept {
  for (const auto& [a, n] : kActions) {
    if (name == n) {
      out = a;
      return true;
    }
  }
  return false;
}

StackId TraceStrings::intern_stack(const std::vector<TraceFrame>& stack) {
  if (stack.empty()) return 0;
  std::vector<std::uint32_t> ids;
  ids.reserve(stack.size());
  for (const TraceFrame& f : stack) ids.push_back(intern_frame(f));
  return intern_stack_ids(ids);
}

std::uint32_t TraceStrings::intern_frame(const TraceFrame& frame) {
  auto [it, added] =
      frame_index_.try_emplace(frame_key(frame), static_cast<std::uint32_t>(frames.size()));
  if (added) frames.push_back(frame);
  return it->second;
}

StackId TraceStrings::intern_stack_ids(const std::vector<std::uint32_t>& frame_ids) {
  if (frame_ids.empty()) return 0;
  std::string stack_key;
  for (const std::uint32_t id : frame_ids) {
    stack_key += std::to_string(id);
    stack_key += ',';
  }
  auto [it, added] = stack_index_.try_emplace(stack_key, static_cast<StackId>(stacks.size()));
  if (added) stacks.push_back(frame_ids);
  return it->second;
}

TagId TraceStrings::intern_tag(std::string_view tag) {
  if (tag.empty()) return 0;
  auto [it, added] = tag_index_.try_emplace(std::string(tag), static_cast<TagId>(tags.size()));
  if (added) tags.emplace_back(tag);
  return it->second;
}

std::vector<TraceFrame> TraceStrings::stack_frames(StackId id) const {
  std::vector<TraceFrame> out;
  if (id >= stacks.size()) return out;
  out.reserve(stacks[id].size());
  for (const std::uint32_t f : stacks[id]) {
    if (f < frames.size()) out.push_back(frames[f]);
  }
  return out;
}

}  // namespace memscope
