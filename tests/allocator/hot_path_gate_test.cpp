// HotPathGate through its own interface: the bit each reason sets, which of them the hit and
// the hot free test, and its checker. Cost: under 0.1 s.
#include <gtest/gtest.h>

#include "allocator/hot_path_gate.hpp"
#include "memscope/errors.hpp"

namespace memscope::detail {
namespace {

using Gate = HotPathGate;

TEST(HotPathGate, EachReasonSetsItsBitAndTheHitAndTheFreeTestTheirs) {
  EXPECT_EQ(Gate::derive(0, false, false, false, false), 0U);
  const unsigned hooks = Gate::kHookWindows | Gate::kHookRecord;
  EXPECT_EQ(Gate::derive(hooks, false, false, false, false), hooks);
  // Blocks waiting with fixed segments: the hit leaves, the free stays.
  const unsigned waiting = Gate::derive(0, true, false, false, false);
  EXPECT_EQ(waiting, Gate::kWaiting);
  EXPECT_NE(waiting & Gate::kReusing, 0U);
  EXPECT_EQ(waiting & Gate::kFreeing, 0U);
  // ...with expandable segments the free leaves too; expandable segments alone change nothing.
  EXPECT_NE(Gate::derive(0, true, false, true, false) & Gate::kFreeing, 0U);
  EXPECT_EQ(Gate::derive(0, false, false, true, false), 0U);
  // Rounding to divisions: only the hit, which would round, leaves.
  const unsigned divisions = Gate::derive(0, false, true, false, false);
  EXPECT_NE(divisions & Gate::kReusing, 0U);
  EXPECT_EQ(divisions & Gate::kFreeing, 0U);
  // At capacity every free goes to the bins.
  EXPECT_NE(Gate::derive(0, false, false, false, true) & Gate::kFreeing, 0U);
}

TEST(HotPathGate, TheCheckerNamesAGateThatDisagrees) {
  EXPECT_NO_THROW(Gate::check(Gate::kWaiting, Gate::kWaiting));
  try {
    Gate::check(0, Gate::kWaiting);
    ADD_FAILURE() << "a gate that forgot waiting blocks passed";
  } catch (const InternalError& e) {
    EXPECT_EQ(e.invariant(), "hot-path-gate");
  }
}

}  // namespace
}  // namespace memscope::detail
