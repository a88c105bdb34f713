// A backend that forwards to another and counts, for each call, the CUDA driver calls that
// CudaBackend (src/backends/cuda) makes for it. Over the simulated device it shows, on a machine
// without a GPU, how many cuMemCreate/cuMemMap/... a trace costs on a real one: the driver calls
// are what make mapping slow, and their number depends only on the allocator's decisions.
//
// The translation follows cuda_backend.cpp and cuda_pages.cpp; keep them in step (n = bytes / page,
// chunk = CudaBackend's physical allocation size, kDefaultChunkBytes unless given):
//   reserve / release                   cuMemAlloc / cuMemFree
//   free_bytes                          cuMemGetInfo
//   map_pages(bytes, page)              ceil(bytes / chunk) cuMemCreate + n cuMemMap + 1
//   cuMemSetAccess unmap_pages(bytes, page, stream)    1 cuStreamSynchronize + n cuMemUnmap, and a
//   cuMemRelease for
//                                       each chunk whose last page goes
//   move_pages(bytes, page, stream)     1 cuStreamSynchronize + n cuMemUnmap + n cuMemMap + 1
//   cuMemSetAccess reserve/release_address_range       cuMemAddressReserve / cuMemAddressFree
// Not thread-safe (a replay runs on one thread).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "memscope/backend.hpp"
#include "memscope/cuda_backend.hpp"

namespace memscope::bench {

struct DriverCalls {
  std::uint64_t mem_alloc = 0;           // cuMemAlloc
  std::uint64_t mem_free = 0;            // cuMemFree
  std::uint64_t mem_get_info = 0;        // cuMemGetInfo
  std::uint64_t mem_create = 0;          // cuMemCreate (one physical handle)
  std::uint64_t mem_map = 0;             // cuMemMap
  std::uint64_t mem_set_access = 0;      // cuMemSetAccess
  std::uint64_t mem_unmap = 0;           // cuMemUnmap
  std::uint64_t mem_release = 0;         // cuMemRelease
  std::uint64_t stream_synchronize = 0;  // cuStreamSynchronize
  std::uint64_t address_reserve = 0;     // cuMemAddressReserve
  std::uint64_t address_free = 0;        // cuMemAddressFree

  [[nodiscard]] std::uint64_t total() const noexcept {
    return mem_alloc + mem_free + mem_get_info + mem_create + mem_map + mem_set_access + mem_unmap +
           mem_release + stream_synchronize + address_reserve + address_free;
  }
};

class CountingBackend final : public Backend {
 public:
  explicit CountingBackend(std::shared_ptr<Backend> inner,
                           std::size_t chunk = CudaBackend::kDefaultChunkBytes)
      : inner_(std::move(inner)), chunk_(chunk) {}

  [[nodiscard]] const DriverCalls& calls() const noexcept { return calls_; }

  [[nodiscard]] std::string name() const override { return inner_->name(); }
  [[nodiscard]] MemoryKind memory_kind() const noexcept override { return inner_->memory_kind(); }
  [[nodiscard]] std::size_t capacity() const override { return inner_->capacity(); }
  [[nodiscard]] std::size_t free_bytes() const override {
    ++calls_.mem_get_info;
    return inner_->free_bytes();
  }
  [[nodiscard]] void* reserve(std::size_t bytes) override {
    ++calls_.mem_alloc;
    return inner_->reserve(bytes);
  }
  void release(void* base, std::size_t bytes) noexcept override {
    ++calls_.mem_free;
    inner_->release(base, bytes);
  }
  [[nodiscard]] std::size_t page_granularity() const noexcept override {
    return inner_->page_granularity();
  }
  [[nodiscard]] void* reserve_address_range(std::size_t bytes) override {
    ++calls_.address_reserve;
    return inner_->reserve_address_range(bytes);
  }
  void release_address_range(void* base, std::size_t bytes) noexcept override {
    ++calls_.address_free;
    inner_->release_address_range(base, bytes);
  }
  [[nodiscard]] bool map_pages(void* address, std::size_t bytes, std::size_t page) override {
    if (!inner_->map_pages(address, bytes, page)) return false;
    const std::size_t most = std::max(page, chunk_ / page * page);
    const auto begin = reinterpret_cast<std::uintptr_t>(address);
    for (std::size_t offset = 0; offset < bytes; offset += most) {
      ++calls_.mem_create;
      auto pages = std::make_shared<std::size_t>(std::min(most, bytes - offset) / page);
      for (std::size_t in = 0; in < std::min(most, bytes - offset); in += page) {
        pages_.emplace(begin + offset + in, pages);
      }
    }
    calls_.mem_map += bytes / page;
    ++calls_.mem_set_access;
    return true;
  }
  void unmap_pages(void* address, std::size_t bytes, std::size_t page,
                   StreamId stream) noexcept override {
    ++calls_.stream_synchronize;
    const auto begin = reinterpret_cast<std::uintptr_t>(address);
    for (auto it = pages_.lower_bound(begin); it != pages_.end() && it->first < begin + bytes;) {
      ++calls_.mem_unmap;
      if (--*it->second == 0) ++calls_.mem_release;
      it = pages_.erase(it);
    }
    inner_->unmap_pages(address, bytes, page, stream);
  }
  [[nodiscard]] bool move_pages(void* from, void* to, std::size_t bytes, std::size_t page,
                                StreamId stream) override {
    if (!inner_->move_pages(from, to, bytes, page, stream)) return false;
    ++calls_.stream_synchronize;
    calls_.mem_unmap += bytes / page;
    calls_.mem_map += bytes / page;
    ++calls_.mem_set_access;
    const auto source = reinterpret_cast<std::uintptr_t>(from);
    const auto target = reinterpret_cast<std::uintptr_t>(to);
    std::map<std::uintptr_t, std::shared_ptr<std::size_t>> moved;
    for (auto it = pages_.lower_bound(source); it != pages_.end() && it->first < source + bytes;) {
      moved.emplace(target + (it->first - source), it->second);
      it = pages_.erase(it);
    }
    pages_.merge(moved);
    return true;
  }
  [[nodiscard]] EventId create_event() override { return inner_->create_event(); }
  void destroy_event(EventId event) noexcept override { inner_->destroy_event(event); }
  void record_event(EventId event, StreamId stream) override {
    inner_->record_event(event, stream);
  }
  [[nodiscard]] bool query_event(EventId event) override { return inner_->query_event(event); }
  void synchronize_event(EventId event) override { inner_->synchronize_event(event); }

 private:
  std::shared_ptr<Backend> inner_;
  std::size_t chunk_;
  mutable DriverCalls calls_;
  // Each mapped page and the count of mapped pages of its chunk (released at 0).
  std::map<std::uintptr_t, std::shared_ptr<std::size_t>> pages_;
};

}  // namespace memscope::bench
