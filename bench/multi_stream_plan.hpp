// A training step on three streams, made up from a seed (the corpus of real traces has
// one stream each, and the goals hold "on multi-stream traces too"). The shape follows what
// data-parallel training does:
//   stream 1, compute: the forward pass allocates each layer's activations (kept) and
//     workspaces (freed at once); the backward pass, layer by layer from the last, allocates the
//     layer's gradient, a workspace, and frees the layer's activations;
//   stream 2, prefetch: the next batch's inputs are allocated at the start of the step, the
//     current batch's freed at its end;
//   stream 3, gradient buckets: every few layers of the backward pass a bucket is allocated for
//     the all-reduce and freed two layers later, and the gradients it carried with it.
// Parameters are allocated once, at the start, on stream 1, and stay live (steady_state.hpp
// frees what a step left live and the next step allocates it again, as a starting set).
// Bench and test code. Deterministic for a seed.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "memscope/replay.hpp"
#include "memscope/units.hpp"

namespace memscope::bench {

namespace multi_stream_detail {

class PlanBuilder {
 public:
  std::uint64_t alloc(std::size_t size, StreamId stream) {
    const std::uint64_t addr = next_addr_++;
    plan_.ops.push_back({false, addr, size, stream});
    live_ += size;
    plan_.peak_live = std::max(plan_.peak_live, live_);
    ++plan_.allocations;
    sizes_.push_back(size);
    return addr;
  }
  void free(std::uint64_t addr, StreamId stream) {
    const std::size_t size = sizes_[addr - kFirst];
    plan_.ops.push_back({true, addr, size, stream});
    live_ -= size;
  }
  ReplayPlan done() {
    plan_.traced_ops = plan_.ops.size();
    plan_.live_at_end = live_;
    return plan_;
  }

 private:
  static constexpr std::uint64_t kFirst = 1;
  std::uint64_t next_addr_ = kFirst;
  std::size_t live_ = 0;
  std::vector<std::size_t> sizes_;
  ReplayPlan plan_;
};

}  // namespace multi_stream_detail

[[nodiscard]] inline ReplayPlan three_stream_training_step(std::uint64_t seed) {
  constexpr StreamId kCompute = 1;
  constexpr StreamId kPrefetch = 2;
  constexpr StreamId kBuckets = 3;
  std::mt19937_64 rng(seed);
  const auto between = [&rng](std::size_t lo, std::size_t hi) {
    return lo + static_cast<std::size_t>(rng() % (hi - lo + 1));
  };
  multi_stream_detail::PlanBuilder b;
  const std::size_t layers = between(12, 24);
  std::vector<std::size_t> param_size(layers);
  std::vector<std::size_t> act_size(layers);
  for (std::size_t l = 0; l < layers; ++l) {
    param_size[l] = between(1, 48) * MiB + between(0, 4095) * 512;
    act_size[l] = between(2, 96) * MiB + between(0, 4095) * 512;
  }
  std::vector<std::uint64_t> params;
  for (std::size_t l = 0; l < layers; ++l) {
    params.push_back(b.alloc(param_size[l], kCompute));
    params.push_back(b.alloc(between(1, 64) * 1024, kCompute));  // its bias
  }
  const std::size_t batch = between(8, 64) * MiB;
  std::vector<std::uint64_t> inputs = {b.alloc(batch, kPrefetch),
                                       b.alloc(between(1, 8) * 4096, kPrefetch)};
  constexpr int kSteps = 3;  // one plan holds a few steps: the prefetch overlaps the next step
  for (int step = 0; step < kSteps; ++step) {
    // The next batch arrives on the prefetch stream while this one computes.
    std::vector<std::uint64_t> next = {b.alloc(batch, kPrefetch),
                                       b.alloc(between(1, 8) * 4096, kPrefetch)};
    std::vector<std::uint64_t> acts(layers);
    for (std::size_t l = 0; l < layers; ++l) {
      const std::uint64_t work = b.alloc(between(1, 32) * MiB, kCompute);
      const std::uint64_t small = b.alloc(between(1, 256) * 512, kCompute);
      acts[l] = b.alloc(act_size[l], kCompute);
      b.free(small, kCompute);
      b.free(work, kCompute);
    }
    std::vector<std::uint64_t> grads;
    std::vector<std::uint64_t> buckets;
    for (std::size_t l = layers; l-- > 0;) {
      const std::uint64_t work = b.alloc(between(1, 32) * MiB, kCompute);
      grads.push_back(b.alloc(param_size[l], kCompute));
      b.free(acts[l], kCompute);
      b.free(work, kCompute);
      if (l % 4 == 0) buckets.push_back(b.alloc(25 * MiB, kBuckets));
      if (buckets.size() > 2) {  // the all-reduce two buckets back is done
        b.free(buckets.front(), kBuckets);
        buckets.erase(buckets.begin());
      }
    }
    for (const std::uint64_t bucket : buckets) b.free(bucket, kBuckets);
    for (const std::uint64_t g : grads) b.free(g, kCompute);  // the optimizer step used them
    for (const std::uint64_t in : inputs) b.free(in, kPrefetch);
    inputs = next;
  }
  (void)params;  // live to the end, as parameters are
  return b.done();
}

}  // namespace memscope::bench
