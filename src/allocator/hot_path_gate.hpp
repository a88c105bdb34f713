// HotPathGate: why calls leave the allocator core's hot path (docs/design.md, "Hot path"), as
// bits of one word that the hit (AllocatorCore::reuse) and the hot free (file_if_hot) each test
// with one instruction. The core keeps the word and its hooks; this says what each bit means,
// what the word must be (derive) and checks that it is (the "hot-path-gate" invariant).
#pragma once

namespace memscope::detail {

struct HotPathGate {
  // Work that most calls skip, behind one test of the hooks on the hot path: peak windows to
  // update after an allocation, events to record. Out of line, so the hot path stays small.
  enum Hook : unsigned { kHookWindows = 1U, kHookRecord = 2U };
  // Besides hooks: events are pending or blocks wait for them (the hot path would have to look
  // at them first); sizes round to divisions; blocks wait with expandable segments on (a free
  // then leaves the hot path: caching them later could change what best fit finds); at
  // capacity (FrontCache::bypassed()): the front cache is bypassed. Expandable segments'
  // placement needs no bit: the segment's FrontCacheRoom, which file_if_hot() tests anyway,
  // says when a free keeps it.
  enum Off : unsigned {
    kWaiting = 4U,
    kDivisions = 8U,
    kWaitingExpandable = 16U,
    kTight = 32U,
    kFreeing = kHookWindows | kHookRecord | kWaitingExpandable | kTight,  // file_if_hot()
    kReusing = ~0U,                                                       // reuse()
  };

  // What the gate must be with these `hooks` (Hook bits), blocks `waiting` for stream events
  // (or events pending), sizes rounding to `divisions`, `expandable` segments, and the front
  // cache bypassed at capacity (`tight`).
  [[nodiscard]] static constexpr unsigned derive(unsigned hooks, bool waiting, bool divisions,
                                                 bool expandable, bool tight) noexcept {
    return hooks | (waiting ? kWaiting : 0U) | (divisions ? kDivisions : 0U) |
           (waiting && expandable ? kWaitingExpandable : 0U) | (tight ? kTight : 0U);
  }
  // The "hot-path-gate" invariant: the `gate` the hot path tests equals what the hooks,
  // waiting blocks and settings make it (`derived`). Throws InternalError.
  static void check(unsigned gate, unsigned derived);
};

}  // namespace memscope::detail
