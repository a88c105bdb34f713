// The lowest peak reserved / peak live that an allocator giving each stream and pool ranges of
// its own, mapped in pages, can reach on a plan: at every moment each (stream, pool) holds at
// least its live blocks' bytes rounded up to whole pages, whatever the placement. With 2 MiB
// pages (the CUDA driver's granularity, memscope's and PyTorch's expandable segments) it is
// above 1.003 on plans whose live bytes are small beside the pages several pools and streams
// leave partly used: the corpus table's goal is out of reach there (docs/benchmarks.md).
// Blocks are rounded and pooled as both allocators do by default (torch_block_list.hpp).
// Bench and test code. Pure.
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <utility>

#include "memscope/replay.hpp"
#include "memscope/units.hpp"
#include "steady_state.hpp"
#include "torch_block_list.hpp"

namespace memscope::bench {

[[nodiscard]] inline double page_bound(const ReplayPlan& plan, std::size_t page = 2 * MiB) {
  std::map<std::pair<StreamId, bool>, std::size_t> live;  // (stream, small pool) -> bytes
  std::size_t pages = 0;  // Σ over (stream, pool) of its live bytes in whole pages
  std::size_t peak = 0;
  for (const ReplayOp& op : plan.ops) {
    const std::size_t size = torch_block_size(op.size);
    std::size_t& bytes = live[{op.stream, size <= kTorchSmallSize}];
    pages -= torch_round_up(bytes, page);
    if (op.is_free) {
      bytes -= std::min(bytes, size);
    } else {
      bytes += size;
    }
    pages += torch_round_up(bytes, page);
    peak = std::max(peak, pages);
  }
  return reserved_ratio(peak, plan.peak_live);
}

}  // namespace memscope::bench
