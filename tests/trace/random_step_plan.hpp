// A made-up step drawn from a seed, for the steady-state checks of issue 25 beyond the corpus:
// a few recurring tensor sizes across both pools (small blocks, 1-20 MiB, 20-300 MiB), one
// stream or two (every third seed), some blocks allocated first and kept to the end (as
// parameters are), then 100-600 allocations and frees, mostly of the newest blocks (stack-like
// lifetimes), sometimes of any; half of what is live at the end stays live (the next iteration
// allocates it again). random_wide_step() draws the shape too: 2-40 sizes up to 1.5 GiB, 1-3
// streams, 50-1,500 ops, how often a free takes any live block rather than the newest, and how
// much of the end stays live. Deterministic for a seed. Test code only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "memscope/replay.hpp"
#include "memscope/units.hpp"
#include "multi_stream_plan.hpp"

namespace memscope::testing {

struct RandomStepLive {
  std::uint64_t addr;
  StreamId stream;
};

[[nodiscard]] inline ReplayPlan random_step(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto between = [&rng](std::size_t lo, std::size_t hi) {
    return lo + static_cast<std::size_t>(rng() % (hi - lo + 1));
  };
  std::vector<std::size_t> sizes(between(3, 16));
  for (std::size_t& size : sizes) {
    const std::size_t kind = between(0, 9);
    if (kind < 4) {
      size = between(1, 2048) * 512;  // the small pool
    } else if (kind < 8) {
      size = between(1, 20) * MiB + between(0, 2047) * 512;
    } else {
      size = between(20, 300) * MiB + between(0, 2047) * 512;
    }
  }
  const StreamId streams = seed % 3 == 0 ? 2 : 1;
  bench::multi_stream_detail::PlanBuilder b;
  std::vector<RandomStepLive> live;
  for (std::size_t i = between(0, 6); i > 0; --i) {  // kept to the end, as parameters are
    b.alloc(sizes[between(0, sizes.size() - 1)], 1);
  }
  const std::size_t ops = between(100, 600);
  for (std::size_t i = 0; i < ops; ++i) {
    const bool free = !live.empty() && between(0, 99) < std::min<std::size_t>(80, live.size() * 8);
    if (free) {
      // Mostly the newest (stack-like lifetimes), sometimes any.
      const std::size_t at = between(0, 3) == 0 ? between(0, live.size() - 1)
                                                : live.size() - 1 - between(0, 1) % live.size();
      b.free(live[at].addr, live[at].stream);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(at));
    } else {
      const StreamId stream = static_cast<StreamId>(between(1, streams));
      live.push_back({b.alloc(sizes[between(0, sizes.size() - 1)], stream), stream});
    }
  }
  // Some of what is live at the end is freed; the rest stays live into the next iteration.
  for (std::size_t i = 0; i < live.size(); ++i) {
    if (between(0, 1) == 0) b.free(live[i].addr, live[i].stream);
  }
  return b.done();
}

[[nodiscard]] inline ReplayPlan random_wide_step(std::uint64_t seed) {
  std::mt19937_64 rng(seed * 7919 + 13);
  const auto between = [&rng](std::size_t lo, std::size_t hi) {
    return lo + static_cast<std::size_t>(rng() % (hi - lo + 1));
  };
  std::vector<std::size_t> sizes(between(2, 40));
  for (std::size_t& size : sizes) {
    const std::size_t kind = between(0, 9);
    if (kind < 3) {
      size = between(1, 2048) * 512;
    } else if (kind < 5) {
      size = between(1, 64) * 4096;
    } else if (kind < 8) {
      size = between(1, 40) * MiB + between(0, 2047) * 512;
    } else {
      size = between(20, 1500) * MiB + between(0, 2047) * 512;
    }
  }
  const auto streams = static_cast<StreamId>(between(1, 3));
  const std::size_t any_percent = between(0, 100);  // frees of any live block, not the newest
  const std::size_t free_cap = between(40, 90);
  bench::multi_stream_detail::PlanBuilder b;
  std::vector<RandomStepLive> live;
  for (std::size_t i = between(0, 10); i > 0; --i) b.alloc(sizes[between(0, sizes.size() - 1)], 1);
  const std::size_t ops = between(50, 1500);
  for (std::size_t i = 0; i < ops; ++i) {
    const bool free =
        !live.empty() && between(0, 99) < std::min<std::size_t>(free_cap, live.size() * 6);
    if (free) {
      const std::size_t at =
          between(0, 99) < any_percent ? between(0, live.size() - 1) : live.size() - 1;
      b.free(live[at].addr, live[at].stream);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(at));
    } else {
      const auto stream = static_cast<StreamId>(between(1, streams));
      live.push_back({b.alloc(sizes[between(0, sizes.size() - 1)], stream), stream});
    }
  }
  const std::size_t keep_percent = between(0, 100);
  for (const RandomStepLive& l : live) {
    if (between(0, 99) >= keep_percent) b.free(l.addr, l.stream);
  }
  return b.done();
}

}  // namespace memscope::testing
