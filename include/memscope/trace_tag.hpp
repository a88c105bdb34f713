// Trace tags: a caller-supplied label that the allocator's recorder stores with every event
// (the tracker's current stage, a phase of a program), read from the calling thread.
//
//   { memscope::TraceTagScope tag("forward"); model.forward(); }  // events inside: "forward"
//
// Tags are interned once, process-wide, and never freed: a TraceTag is a stable pointer, so
// changing the current tag costs a pointer swap and recording it costs a load. Intern a bounded
// set of names (stage names, phases), not one per call.
//
// Thread safety: the current tag is thread-local; interning is thread-safe.
// Errors: intern_trace_tag() may throw std::bad_alloc; nothing else throws.
#pragma once

#include <string>
#include <string_view>

namespace memscope {

// An interned tag; nullptr is "no tag".
using TraceTag = const std::string*;

// The interned tag for `name` (nullptr for an empty name); equal names give equal pointers.
[[nodiscard]] TraceTag intern_trace_tag(std::string_view name);
// The calling thread's current tag.
[[nodiscard]] TraceTag current_trace_tag() noexcept;
// Sets the calling thread's current tag and returns the one it replaces.
TraceTag exchange_trace_tag(TraceTag tag) noexcept;
inline void set_trace_tag(std::string_view name) {
  exchange_trace_tag(intern_trace_tag(name));
}

// Sets the calling thread's tag for a scope and restores the previous one when destroyed.
class TraceTagScope {
 public:
  explicit TraceTagScope(std::string_view name)
      : previous_(exchange_trace_tag(intern_trace_tag(name))) {}
  explicit TraceTagScope(TraceTag tag) noexcept : previous_(exchange_trace_tag(tag)) {}
  TraceTagScope(const TraceTagScope&) = delete;
  TraceTagScope& operator=(const TraceTagScope&) = delete;
  ~TraceTagScope() noexcept { exchange_trace_tag(previous_); }

 private:
  TraceTag previous_;
};

}  // namespace memscope
