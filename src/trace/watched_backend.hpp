// A simulated device that notes the replay op at which its reserved bytes peaked.
//
// The replay owns both the allocator and this backend, so every segment the allocator reserves
// and every page it maps (expandable segments) passes here: reserved bytes here are the
// allocator's reserved bytes, and the op that pushed them to their maximum is the peak's position.
// The replay loop calls at(op) before each op (one store); reserve() reads it only when a segment
// is reserved, which is rare. Thread safety: one replay at a time (the allocator serialises its
// calls).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "memscope/forwarding_backend.hpp"
#include "memscope/replay.hpp"
#include "memscope/simulated_backend.hpp"

namespace memscope {

class WatchedBackend final : public ForwardingBackend {
 public:
  explicit WatchedBackend(std::size_t capacity)
      : WatchedBackend(std::make_shared<SimulatedBackend>(capacity)) {}

  void at(std::size_t op) noexcept { op_ = op; }
  [[nodiscard]] std::int64_t reserved() const noexcept {
    return static_cast<std::int64_t>(reserved_);
  }
  [[nodiscard]] std::size_t peak_op() const noexcept { return peak_op_; }

  [[nodiscard]] void* reserve(std::size_t bytes) override {
    void* p = ForwardingBackend::reserve(bytes);
    if (p != nullptr) note_reserved();
    return p;
  }
  void release(void* base, std::size_t bytes) noexcept override {
    ForwardingBackend::release(base, bytes);
    reserved_ = device_->reserved_bytes();
  }
  // Mapped pages count as reserved bytes, as the allocator counts them (a move keeps the total).
  [[nodiscard]] bool map_pages(void* address, std::size_t bytes, std::size_t page) override {
    if (!ForwardingBackend::map_pages(address, bytes, page)) return false;
    note_reserved();
    return true;
  }
  void unmap_pages(void* address, std::size_t bytes, std::size_t page,
                   StreamId stream) noexcept override {
    ForwardingBackend::unmap_pages(address, bytes, page, stream);
    reserved_ = device_->reserved_bytes();
  }

 private:
  explicit WatchedBackend(const std::shared_ptr<SimulatedBackend>& device)
      : ForwardingBackend(device), device_(device.get()) {}

  // The device's own count (segments and mapped pages), so a page it ignored is not counted.
  void note_reserved() noexcept {
    reserved_ = device_->reserved_bytes();
    if (reserved_ > peak_) {
      peak_ = reserved_;
      peak_op_ = op_;
    }
  }

  const SimulatedBackend* device_;  // the inner backend, kept alive by the base
  std::size_t op_ = ReplayMoment::kNever;
  std::size_t reserved_ = 0;
  std::size_t peak_ = 0;
  std::size_t peak_op_ = ReplayMoment::kNever;
};

}  // namespace memscope
