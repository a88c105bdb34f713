// SimulatedBackend: a device of any capacity that hands out addresses with no memory behind
// them. It fails a reservation exactly when the reserved total would exceed the capacity, which
// makes it the backend for trace replay and capacity planning, and lets tests drive the
// out-of-memory path byte for byte.
//
// Streams: by default work completes at once. hold(stream) makes events recorded on that stream
// afterwards stay pending until complete(stream) (or until someone synchronizes on them, which
// models waiting for the device), so stream-ordering rules are testable without a GPU.
//
// Addresses start at 1 TiB, are 2 MiB aligned and are never reused, so a stale pointer can
// never alias a newer segment. Thread-safe.
#pragma once

#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "memscope/backend.hpp"

namespace memscope {

class SimulatedBackend final : public Backend {
 public:
  explicit SimulatedBackend(std::size_t capacity_bytes);

  [[nodiscard]] std::string name() const override;
  [[nodiscard]] MemoryKind memory_kind() const noexcept override { return MemoryKind::simulated; }
  [[nodiscard]] std::size_t capacity() const override { return capacity_; }
  [[nodiscard]] std::size_t free_bytes() const override;
  [[nodiscard]] std::size_t reserved_bytes() const;

  [[nodiscard]] void* reserve(std::size_t bytes) override;
  void release(void* base, std::size_t bytes) noexcept override;

  [[nodiscard]] EventId create_event() override;
  void destroy_event(EventId event) noexcept override;
  void record_event(EventId event, StreamId stream) override;
  [[nodiscard]] bool query_event(EventId event) override;
  void synchronize_event(EventId event) override;

  // Events recorded on `stream` from now on stay pending until complete(stream).
  void hold(StreamId stream);
  // Completes every pending event of `stream` and stops holding it.
  void complete(StreamId stream);
  [[nodiscard]] std::size_t pending_events() const;

 private:
  mutable std::mutex mutex_;
  const std::size_t capacity_;
  std::size_t reserved_ = 0;
  std::uintptr_t next_address_;
  EventId next_event_ = 1;
  std::unordered_set<StreamId> held_streams_;
  std::unordered_map<EventId, StreamId> pending_;  // event -> stream it waits on
};

}  // namespace memscope
