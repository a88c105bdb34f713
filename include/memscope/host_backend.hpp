// HostBackend: segments are anonymous private mappings, populated when reserved so that a
// reserved byte is a resident byte (as device memory is). Releasing a segment unmaps it, so the
// process RSS falls by its size.
//
// Capacity is the machine's memory (MemTotal, or the cgroup limit when lower); free_bytes() is
// MemAvailable. A reservation larger than MemAvailable is refused (nullptr) rather than risking
// the kernel's OOM killer. Work on streams completes at once: every event is complete when
// recorded. Thread-safe.
//
// Page mapping (expandable segments): the granularity is the OS page. An address range is a
// PROT_NONE, MAP_NORESERVE mapping (address space only, no memory, no commit charge).
// map_pages() puts populated read-write pages over part of it with MAP_FIXED (refused, false,
// when the bytes exceed MemAvailable or mmap says ENOMEM, e.g. vm.max_map_count reached), so
// the RSS rises by the bytes mapped; unmap_pages() puts PROT_NONE pages back the same way (one
// atomic replacement: the memory is freed, the RSS falls, and the range never has a hole
// another mmap could take). move_pages() is mremap(MREMAP_FIXED | MREMAP_DONTUNMAP): the
// resident pages themselves move (no copy, no fault, RSS unchanged) and the source becomes
// PROT_NONE again; it returns false where the kernel lacks MREMAP_DONTUNMAP (before 5.7).
// mremap takes its source from one mapping, so a range the kernel keeps as several mappings
// moves page by page; a failure after part of it moved throws BackendError. Streams are
// ignored: host work is complete when queued.
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

  [[nodiscard]] std::size_t page_granularity() const noexcept override;
  [[nodiscard]] void* reserve_address_range(std::size_t bytes) override;
  void release_address_range(void* base, std::size_t bytes) noexcept override;
  [[nodiscard]] bool map_pages(void* address, std::size_t bytes, std::size_t page) override;
  void unmap_pages(void* address, std::size_t bytes, std::size_t page,
                   StreamId stream) noexcept override;
  [[nodiscard]] bool move_pages(void* from, void* to, std::size_t bytes, std::size_t page,
                                StreamId stream) override;

  [[nodiscard]] EventId create_event() override { return 1; }
  void destroy_event(EventId /*event*/) noexcept override {}
  void record_event(EventId /*event*/, StreamId /*stream*/) override {}
  [[nodiscard]] bool query_event(EventId /*event*/) override { return true; }
  void synchronize_event(EventId /*event*/) override {}
};

}  // namespace memscope
