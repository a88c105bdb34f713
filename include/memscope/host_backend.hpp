// HostBackend: segments are anonymous private mappings, populated when reserved so that a
// reserved byte is a resident byte (as device memory is). Releasing a segment unmaps it, so the
// process RSS falls by its size.
//
// Capacity is the machine's memory (MemTotal, or the cgroup limit when lower); free_bytes() is
// MemAvailable. A reservation larger than MemAvailable is refused (nullptr) rather than risking
// the kernel's OOM killer. Work on streams completes at once: every event is complete when
// recorded. Thread-safe.
#pragma once

#include "memscope/backend.hpp"

namespace memscope {

class HostBackend final : public Backend {
 public:
  HostBackend() = default;

  [[nodiscard]] std::string name() const override { return "host"; }
  [[nodiscard]] MemoryKind memory_kind() const noexcept override { return MemoryKind::host; }
  [[nodiscard]] std::size_t capacity() const override;
  [[nodiscard]] std::size_t free_bytes() const override;

  [[nodiscard]] void* reserve(std::size_t bytes) override;
  void release(void* base, std::size_t bytes) noexcept override;

  [[nodiscard]] EventId create_event() override { return 1; }
  void destroy_event(EventId /*event*/) noexcept override {}
  void record_event(EventId /*event*/, StreamId /*stream*/) override {}
  [[nodiscard]] bool query_event(EventId /*event*/) override { return true; }
  void synchronize_event(EventId /*event*/) override {}
};

}  // namespace memscope
