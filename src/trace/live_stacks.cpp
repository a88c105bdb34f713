// Live allocations grouped by stack and origin (replay.hpp): the one grouping behind the
// replay's breakdowns at its peaks and `memscope diff`'s sites of two traces.
#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "memscope/replay.hpp"

namespace memscope {

LiveBreakdown live_by_stack(const ReplayPlan& plan, const std::vector<std::size_t>& allocations) {
  // The origin takes two bits under the stack id: one entry per (stack, origin).
  std::unordered_map<std::uint64_t, StackBytes> by_stack;
  for (const std::size_t i : allocations) {
    const ReplayOp& op = plan.ops[i];
    const SiteOrigin origin = origin_of(plan, i);
    StackBytes& s = by_stack[(std::uint64_t{op.stack} << 2U) | static_cast<std::uint64_t>(origin)];
    s.stack = op.stack;
    s.origin = origin;
    s.bytes += op.size;
    ++s.count;
  }
  LiveBreakdown out;
  out.stacks.reserve(by_stack.size());
  for (const auto& [key, s] : by_stack) {
    out.bytes += s.bytes;
    out.count += s.count;
    out.stacks.push_back(s);
  }
  std::sort(out.stacks.begin(), out.stacks.end(), [](const StackBytes& a, const StackBytes& b) {
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    return a.stack != b.stack ? a.stack < b.stack : a.origin < b.origin;
  });
  return out;
}

}  // namespace memscope
