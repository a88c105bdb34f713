// What a placement that never moves a page could reach on a plan if it knew the whole iteration
// in advance: every block gets one address for its whole life (offline dynamic storage
// allocation), each stream and pool packs its own range, and the range is mapped in 2 MiB pages
// as far as its highest block reaches. The figure is peak reserved / peak live.
//
// Why: expandable segments that never move a page (`never`, and `at_limit` below the device's
// limit) reserve what their placement leaves unused inside a range. Whether a better placement
// (for instance one learned from the first iteration and kept in the next) could meet the 1.003
// goal without moving pages is the question this asks: where even the best of these packings,
// made with every future free known, is far above 1.003, moving pages (or memory that is not one
// range per stream) is the likely way to meet it. The packings are heuristics, not the optimum
// (the problem is NP-hard; one can land above an in-order placement): the best of greedy by
// size, by lifetime and by size × lifetime, each placing a block in the smallest gap among the
// blocks already placed that overlap it in time, or in the lowest.
// Blocks are rounded and pooled as both allocators do by default (torch_block_list.hpp).
// Bench and test code. Pure. Time: blocks² per (stream, pool) at worst (1 s on the corpus's
// largest trace).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <numeric>
#include <utility>
#include <vector>

#include "memscope/replay.hpp"
#include "memscope/units.hpp"
#include "steady_state.hpp"
#include "torch_block_list.hpp"

namespace memscope::bench {

// One block's life: ops [start, end) of the plan (end is the plan's size for a block left live),
// its rounded size, and the offset a packing gives it.
struct PackedBlock {
  std::size_t start = 0;
  std::size_t end = 0;
  std::size_t size = 0;
  std::size_t offset = 0;
};

enum class PackOrder { size, lifetime, area };
enum class PackGap { smallest, lowest };

// Places every block of `blocks` (offsets written there) in `order`, each into the chosen gap
// among the blocks placed before it that overlap it in time, else above them; returns the extent
// (the highest end of a block).
inline std::size_t pack_blocks(std::vector<PackedBlock>& blocks, PackOrder order, PackGap gap) {
  std::vector<std::size_t> by(blocks.size());
  std::iota(by.begin(), by.end(), std::size_t{0});
  const auto life = [&](std::size_t i) { return blocks[i].end - blocks[i].start; };
  const auto key = [&](std::size_t i) {
    switch (order) {
      case PackOrder::size:
        return std::pair<double, double>(static_cast<double>(blocks[i].size),
                                         static_cast<double>(life(i)));
      case PackOrder::lifetime:
        return std::pair<double, double>(static_cast<double>(life(i)),
                                         static_cast<double>(blocks[i].size));
      case PackOrder::area:
        break;
    }
    return std::pair<double, double>(
        static_cast<double>(blocks[i].size) * static_cast<double>(life(i)), 0.0);
  };
  std::stable_sort(by.begin(), by.end(),
                   [&](std::size_t a, std::size_t b) { return key(a) > key(b); });
  std::vector<std::size_t> placed;
  std::vector<std::pair<std::size_t, std::size_t>> taken;  // [offset, end) overlapping in time
  std::size_t extent = 0;
  for (const std::size_t i : by) {
    PackedBlock& b = blocks[i];
    taken.clear();
    for (const std::size_t j : placed) {
      const PackedBlock& o = blocks[j];
      if (o.start < b.end && b.start < o.end) taken.emplace_back(o.offset, o.offset + o.size);
    }
    std::sort(taken.begin(), taken.end());
    std::size_t top = 0;  // the highest end of the taken ranges seen so far
    bool found = false;
    std::size_t best_gap = 0;
    for (const auto& [from, to] : taken) {
      if (from > top && from - top >= b.size && (!found || from - top < best_gap)) {
        found = true;
        best_gap = from - top;
        b.offset = top;
        if (gap == PackGap::lowest) break;
      }
      top = std::max(top, to);
    }
    if (!found) b.offset = top;
    extent = std::max(extent, b.offset + b.size);
    placed.push_back(i);
  }
  return extent;
}

// The blocks of `plan` per (stream, small pool), in the order of their allocs.
[[nodiscard]] inline std::map<std::pair<StreamId, bool>, std::vector<PackedBlock>> plan_blocks(
    const ReplayPlan& plan) {
  std::map<std::pair<StreamId, bool>, std::vector<PackedBlock>> pools;
  std::map<std::uint64_t, std::pair<std::pair<StreamId, bool>, std::size_t>> live;  // by address
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const ReplayOp& op = plan.ops[i];
    if (op.is_free) {
      const auto it = live.find(op.addr);
      if (it == live.end()) continue;
      pools[it->second.first][it->second.second].end = i;
      live.erase(it);
      continue;
    }
    const std::size_t size = torch_block_size(op.size);
    const std::pair<StreamId, bool> pool{op.stream, size <= kTorchSmallSize};
    std::vector<PackedBlock>& blocks = pools[pool];
    blocks.push_back({i, plan.ops.size(), size, 0});
    live[op.addr] = {pool, blocks.size() - 1};
  }
  return pools;
}

// The best packing's peak reserved / peak live: per (stream, pool), the lowest extent of the six
// packings, in whole pages, summed.
[[nodiscard]] inline double static_packing(const ReplayPlan& plan, std::size_t page = 2 * MiB) {
  constexpr std::array<PackOrder, 3> kOrders{PackOrder::size, PackOrder::lifetime, PackOrder::area};
  std::size_t reserved = 0;
  for (auto& [pool, blocks] : plan_blocks(plan)) {
    std::size_t best = 0;
    bool first = true;
    for (const PackOrder order : kOrders) {
      for (const PackGap gap : {PackGap::smallest, PackGap::lowest}) {
        const std::size_t extent = pack_blocks(blocks, order, gap);
        best = first ? extent : std::min(best, extent);
        first = false;
      }
    }
    reserved += torch_round_up(best, page);
  }
  return reserved_ratio(reserved, plan.peak_live);
}

}  // namespace memscope::bench
