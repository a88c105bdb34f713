// SimulatedBackend: a device of any capacity that hands out addresses with no memory behind
// them. It fails a reservation exactly when the reserved total would exceed the capacity, which
// makes it the backend for trace replay and capacity planning, and lets tests drive the
// out-of-memory path byte for byte.
//
// Streams: by default work completes at once. hold(stream) makes events recorded on that stream
// afterwards stay pending until complete(stream) (or until someone synchronizes on them, which
// models waiting for the device), so stream-ordering rules are testable without a GPU.
//
// Addresses start at 1 TiB, are 2 MiB aligned and are not reused while the simulated address
// space (up to 2^56) lasts, so a stale pointer does not alias a newer segment. Once it is used
// up, address ranges released by release_address_range() are reused (best fit), as a real
// device's or the kernel's are: an allocator that releases and reserves ranges all the time
// (page recycling across thousands of streams) would otherwise run out with the device empty.
// Thread-safe.
//
// Page mapping (expandable segments): the granularity is 2 MiB. Address ranges come from the
// same addresses (reused as above) and cost no capacity; mapped pages count against the capacity
// exactly as segments do (reserved_bytes() = segments + mapped_bytes(); free_bytes() =
// capacity - reserved_bytes()), and map_pages() fails (false) exactly when the total would
// exceed the capacity. Mapping is checked byte for byte: mapping a page that is mapped already,
// or outside a reserved range, throws BackendError (a caller's bug made visible); unmapping
// pages that are not mapped ignores them; move_pages() is bookkeeping (the totals stay) and
// always moves (true), after the same checks (source mapped, destination unmapped and inside a
// range). Releasing a range unmaps what is still mapped in it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
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
  // Bytes in segments and mapped pages: what the device has given out.
  [[nodiscard]] std::size_t reserved_bytes() const;
  // Bytes in mapped pages (part of reserved_bytes()).
  [[nodiscard]] std::size_t mapped_bytes() const;

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
  // Under mutex_. Throws BackendError unless [begin, end) lies in one reserved range, with
  // `page` dividing its offset from the range's base.
  void check_in_range(const char* call, std::uintptr_t begin, std::uintptr_t end,
                      std::size_t page) const;
  [[nodiscard]] bool any_mapped(std::uintptr_t begin, std::uintptr_t end) const;
  [[nodiscard]] bool all_mapped(std::uintptr_t begin, std::uintptr_t end) const;
  void add_mapped(std::uintptr_t begin, std::uintptr_t end);
  // Takes [begin, end) out of the mapped runs; returns the bytes that were mapped in it (the
  // caller adjusts mapped_).
  std::size_t remove_mapped(std::uintptr_t begin, std::uintptr_t end);
  // A released range's hole for `bytes`, taken out of released_ranges_; 0 when none fits.
  [[nodiscard]] std::uintptr_t reuse_released_range(std::size_t bytes);
  void remember_released_range(std::uintptr_t base, std::size_t bytes);  // may throw bad_alloc

  mutable std::mutex mutex_;
  const std::size_t capacity_;
  std::size_t reserved_ = 0;                               // in segments
  std::size_t mapped_ = 0;                                 // in mapped pages
  std::map<std::uintptr_t, std::size_t> ranges_;           // reserved range: base -> bytes
  std::map<std::uintptr_t, std::uintptr_t> mapped_pages_;  // mapped: begin -> end, coalesced
  std::uintptr_t next_address_;                            // the never-used addresses start
  std::map<std::uintptr_t, std::size_t> released_ranges_;  // holes: base -> bytes, coalesced
  EventId next_event_ = 1;
  std::unordered_set<StreamId> held_streams_;
  std::unordered_map<EventId, StreamId> pending_;  // event -> stream it waits on
};

}  // namespace memscope
