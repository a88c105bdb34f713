// SampledWindow: a tracker window (memory_source.hpp) over a PeakSampler, for sources whose
// reading can only be polled (NVML). It opens a sampler slot at the reading it is given and,
// on close, takes one last reading and folds it into the slot's peak.
//
// Thread safety: one window is used by one thread at a time, while the sampler's thread raises
// its peak; every access to the peak goes through the sampler's lock. Errors: close() and the
// destructor never throw; a last reading that fails counts as the window's begin value.
#pragma once

#include <cstdint>
#include <memory>

#include "memscope/memory_source.hpp"
#include "probes/nvml/peak_sampler.hpp"

namespace memscope::detail {

class SampledWindow final : public MemorySource::Window {
 public:
  SampledWindow(std::shared_ptr<PeakSampler> sampler, std::int64_t begin);
  ~SampledWindow() override;

  [[nodiscard]] std::int64_t begin() const noexcept override { return begin_; }
  MemorySource::Reading close() noexcept override { return finish(); }

 private:
  // Non-virtual, so the destructor can close the window too.
  MemorySource::Reading finish() noexcept;

  std::shared_ptr<PeakSampler> sampler_;
  std::shared_ptr<PeakSampler::Slot> slot_;
  std::int64_t begin_;
  bool closed_ = false;
  MemorySource::Reading final_{};
};

}  // namespace memscope::detail
