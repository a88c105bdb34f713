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
#include <string>

#include "memscope/replay.hpp"
#include "memscope/simulated_backend.hpp"

namespace memscope {

class WatchedBackend final : public Backend {
 public:
  explicit WatchedBackend(std::size_t capacity) : device_(capacity) {}

  void at(std::size_t op) noexcept { op_ = op; }
  [[nodiscard]] std::int64_t reserved() const noexcept {
    return static_cast<std::int64_t>(reserved_);
  }
  [[nodiscard]] std::size_t peak_op() const noexcept { return peak_op_; }

  [[nodiscard]] std::string name() const override { return device_.name(); }
  [[nodiscard]] MemoryKind memory_kind() const noexcept override { return MemoryKind::simulated; }
  [[nodiscard]] std::size_t capacity() const override { return device_.capacity(); }
  [[nodiscard]] std::size_t free_bytes() const override { return device_.free_bytes(); }

  [[nodiscard]] void* reserve(std::size_t bytes) override {
    void* p = device_.reserve(bytes);
    if (p != nullptr) note_reserved();
    return p;
  }
  void release(void* base, std::size_t bytes) noexcept override {
    device_.release(base, bytes);
    reserved_ = device_.reserved_bytes();
  }

  // Page mapping is the simulated device's; mapped pages count as reserved bytes, as the
  // allocator counts them (a move keeps the total).
  [[nodiscard]] std::size_t page_granularity() const noexcept override {
    return device_.page_granularity();
  }
  [[nodiscard]] void* reserve_address_range(std::size_t bytes) override {
    return device_.reserve_address_range(bytes);
  }
  void release_address_range(void* base, std::size_t bytes) noexcept override {
    device_.release_address_range(base, bytes);
  }
  [[nodiscard]] bool map_pages(void* address, std::size_t bytes, std::size_t page) override {
    if (!device_.map_pages(address, bytes, page)) return false;
    note_reserved();
    return true;
  }
  void unmap_pages(void* address, std::size_t bytes, std::size_t page,
                   StreamId stream) noexcept override {
    device_.unmap_pages(address, bytes, page, stream);
    reserved_ = device_.reserved_bytes();
  }
  [[nodiscard]] bool move_pages(void* from, void* to, std::size_t bytes, std::size_t page,
                                StreamId stream) override {
    return device_.move_pages(from, to, bytes, page, stream);
  }

  [[nodiscard]] EventId create_event() override { return device_.create_event(); }
  void destroy_event(EventId event) noexcept override { device_.destroy_event(event); }
  void record_event(EventId event, StreamId stream) override {
    device_.record_event(event, stream);
  }
  [[nodiscard]] bool query_event(EventId event) override { return device_.query_event(event); }
  void synchronize_event(EventId event) override { device_.synchronize_event(event); }

 private:
  // The device's own count (segments and mapped pages), so a page it ignored is not counted.
  void note_reserved() noexcept {
    reserved_ = device_.reserved_bytes();
    if (reserved_ > peak_) {
      peak_ = reserved_;
      peak_op_ = op_;
    }
  }

  SimulatedBackend device_;
  std::size_t op_ = ReplayMoment::kNever;
  std::size_t reserved_ = 0;
  std::size_t peak_ = 0;
  std::size_t peak_op_ = ReplayMoment::kNever;
};

}  // namespace memscope
