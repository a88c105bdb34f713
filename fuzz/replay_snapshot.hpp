// What every trace fuzz target does with a trace it could read: plan it and replay it on a small
// simulated device (out-of-memory is counted by replay(), never thrown). A plan the events
// contradict is a TraceFormatError, as for any other bad input.
#pragma once

#include "memscope/trace.hpp"

namespace memscope::fuzz {

inline void plan_and_replay(const TorchSnapshot& snapshot) {
  if (snapshot.device_traces.empty()) return;
  const ReplayPlan plan = build_replay_plan(snapshot);
  ReplayOptions options;
  options.capacity = GiB;
  (void)replay(plan, options);
}

}  // namespace memscope::fuzz
