// Peak windows over a reading that can only be polled (NVML's memory figures): a thread reads
// the value every interval while at least one window is open and raises each open window's
// peak. It sleeps on a condition variable while no window is open (never a busy loop), so an
// idle source costs nothing. Peaks shorter than the interval can be missed; sources that use it
// say "sampling <interval>" in their mode.
//
// Windows may be opened and closed in any order from any thread; each keeps its own peak.
// Thread safety: all methods. Errors: a reading that throws is skipped by the thread; open()
// and close() never throw except std::bad_alloc from open().
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace memscope::detail {

class PeakSampler {
 public:
  // One window's peak. Opaque: the sampler's thread writes it under the sampler's lock, so
  // only the sampler reads it (close() returns it).
  class Slot {
   public:
    explicit Slot(std::int64_t begin) : peak_(begin) {}

   private:
    friend class PeakSampler;
    std::int64_t peak_;
  };

  PeakSampler(std::function<std::int64_t()> read, std::chrono::microseconds interval);
  PeakSampler(const PeakSampler&) = delete;
  PeakSampler& operator=(const PeakSampler&) = delete;
  ~PeakSampler();

  // A window whose peak starts at `begin` and rises with every sample until close().
  [[nodiscard]] std::shared_ptr<Slot> open(std::int64_t begin);
  // Stops sampling for `slot`, folds `last` (a final reading) in, and returns its peak.
  std::int64_t close(const std::shared_ptr<Slot>& slot, std::int64_t last) noexcept;

  [[nodiscard]] std::int64_t read() const { return read_(); }

 private:
  void run();

  const std::function<std::int64_t()> read_;
  const std::chrono::microseconds interval_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::shared_ptr<Slot>> open_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after every other member is built
};

}  // namespace memscope::detail
