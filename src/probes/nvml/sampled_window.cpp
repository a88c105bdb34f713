#include "probes/nvml/sampled_window.hpp"

#include <algorithm>

namespace memscope::detail {

SampledWindow::SampledWindow(std::shared_ptr<PeakSampler> sampler, std::int64_t begin)
    : sampler_(std::move(sampler)), slot_(sampler_->open(begin)), begin_(begin) {}

SampledWindow::~SampledWindow() {
  (void)finish();
}

MemorySource::Reading SampledWindow::finish() noexcept {
  if (closed_) return final_;
  closed_ = true;
  // The slot's peak belongs to the sampler's thread until close() below takes it under the
  // sampler's lock: never read it here.
  std::int64_t current = begin_;
  try {
    current = sampler_->read();
  } catch (...) {
    current = begin_;  // no last reading: the window's own begin is the best we know
  }
  const std::int64_t peak = sampler_->close(slot_, current);
  final_ = {current, std::max({peak, current, begin_})};
  return final_;
}

}  // namespace memscope::detail
