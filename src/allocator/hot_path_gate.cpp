#include "allocator/hot_path_gate.hpp"

#include <fmt/format.h>

#include "allocator/invariant.hpp"

namespace memscope::detail {

void HotPathGate::check(unsigned gate, unsigned derived) {
  if (gate != derived) {
    broken_invariant(
        "hot-path-gate",
        fmt::format("off_hot_path_ is {:#x}; hooks, waiting blocks and settings make it {:#x}",
                    gate, derived));
  }
}

}  // namespace memscope::detail
