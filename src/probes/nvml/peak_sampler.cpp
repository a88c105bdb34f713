#include "probes/nvml/peak_sampler.hpp"

#include <algorithm>

namespace memscope::detail {

PeakSampler::PeakSampler(std::function<std::int64_t()> read, std::chrono::microseconds interval)
    : read_(std::move(read)), interval_(interval), thread_([this] { run(); }) {}

PeakSampler::~PeakSampler() {
  {
    const std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::shared_ptr<PeakSampler::Slot> PeakSampler::open(std::int64_t begin) {
  auto slot = std::make_shared<Slot>(begin);
  {
    const std::lock_guard lock(mutex_);
    open_.push_back(slot);
  }
  wake_.notify_all();
  return slot;
}

std::int64_t PeakSampler::close(const std::shared_ptr<Slot>& slot, std::int64_t last) noexcept {
  const std::lock_guard lock(mutex_);
  open_.erase(std::remove(open_.begin(), open_.end(), slot), open_.end());
  slot->peak_ = std::max(slot->peak_, last);
  return slot->peak_;
}

void PeakSampler::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [this] { return stop_ || !open_.empty(); });
    if (stop_) return;
    lock.unlock();
    std::int64_t value = 0;
    bool ok = true;
    try {
      value = read_();  // NVML may take a millisecond: never under the lock
    } catch (...) {
      ok = false;  // a failed reading is skipped; the next one may work
    }
    lock.lock();
    if (ok) {
      for (const auto& slot : open_) slot->peak_ = std::max(slot->peak_, value);
    }
    wake_.wait_for(lock, interval_, [this] { return stop_; });
  }
}

}  // namespace memscope::detail
