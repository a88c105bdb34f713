// A backend that forwards to another and counts, for each call, the CUDA driver calls that
// CudaBackend (src/backends/cuda) makes for it. Over the simulated device it shows, on a machine
// without a GPU, how many cuMemCreate/cuMemMap/... a trace costs on a real one: the driver calls
// are what make mapping slow, and their number depends only on the allocator's decisions.
//
// The translation follows cuda_backend.cpp and cuda_pages.cpp; keep them in step (n = bytes / page:
// one physical allocation and one mapping per page, so that pages unmap one by one):
//   reserve / release                   cuMemAlloc / cuMemFree
//   free_bytes                          cuMemGetInfo
//   map_pages(bytes, page)              n cuMemCreate + n cuMemMap + 1 cuMemSetAccess over n
//   mappings unmap_pages(bytes, page, stream)    1 cuStreamSynchronize + n cuMemUnmap + n
//   cuMemRelease move_pages(bytes, page, stream)     1 cuStreamSynchronize + n cuMemUnmap + n
//   cuMemMap +
//                                       1 cuMemSetAccess over n mappings
//   reserve/release_address_range       cuMemAddressReserve / cuMemAddressFree
// cuMemSetAccess costs about the same per mapping it covers as one call on one mapping (an H200:
// 979 us for 32 mappings of 2 MiB, 46 us for one; docs/gpu.md), so mappings_given_access counts
// the mappings, which is what the time follows.
// Not thread-safe (a replay runs on one thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "memscope/backend.hpp"
#include "memscope/forwarding_backend.hpp"

namespace memscope::bench {

struct DriverCalls {
  std::uint64_t mem_alloc = 0;              // cuMemAlloc
  std::uint64_t mem_free = 0;               // cuMemFree
  std::uint64_t mem_get_info = 0;           // cuMemGetInfo
  std::uint64_t mem_create = 0;             // cuMemCreate (one physical handle)
  std::uint64_t mem_map = 0;                // cuMemMap
  std::uint64_t mem_set_access = 0;         // cuMemSetAccess
  std::uint64_t mappings_given_access = 0;  // the mappings those calls covered
  std::uint64_t mem_unmap = 0;              // cuMemUnmap
  std::uint64_t mem_release = 0;            // cuMemRelease
  std::uint64_t stream_synchronize = 0;     // cuStreamSynchronize
  std::uint64_t address_reserve = 0;        // cuMemAddressReserve
  std::uint64_t address_free = 0;           // cuMemAddressFree

  [[nodiscard]] std::uint64_t total() const noexcept {
    return mem_alloc + mem_free + mem_get_info + mem_create + mem_map + mem_set_access + mem_unmap +
           mem_release + stream_synchronize + address_reserve + address_free;
  }
  // The calls made since `before` (a count taken earlier from the same backend).
  [[nodiscard]] DriverCalls since(const DriverCalls& before) const noexcept {
    return {mem_alloc - before.mem_alloc,
            mem_free - before.mem_free,
            mem_get_info - before.mem_get_info,
            mem_create - before.mem_create,
            mem_map - before.mem_map,
            mem_set_access - before.mem_set_access,
            mappings_given_access - before.mappings_given_access,
            mem_unmap - before.mem_unmap,
            mem_release - before.mem_release,
            stream_synchronize - before.stream_synchronize,
            address_reserve - before.address_reserve,
            address_free - before.address_free};
  }
};

// What `calls` would take on the NVIDIA H200 of docs/gpu.md ("Where mapping time goes": driver
// 580.159.04, CUDA 13.0, 2026-12-04; medians of 20 at 2 MiB, cuMemSetAccess per mapping it
// covers), in microseconds: an estimate from measured prices, not a measured time. Leaves out
// cuStreamSynchronize, which waits for whatever the stream has queued, and cuMemGetInfo.
[[nodiscard]] inline double h200_driver_us(const DriverCalls& calls) noexcept {
  const auto us = [](std::uint64_t n, double each) { return static_cast<double>(n) * each; };
  return us(calls.mem_create, 15.8) + us(calls.mem_map, 1.7) +
         us(calls.mappings_given_access, 50.2) + us(calls.mem_unmap, 29.7) +
         us(calls.mem_release, 15.6) + us(calls.mem_alloc, 55.8) + us(calls.mem_free, 43.9);
}

class CountingBackend final : public ForwardingBackend {
 public:
  explicit CountingBackend(std::shared_ptr<Backend> inner) : ForwardingBackend(std::move(inner)) {}

  [[nodiscard]] const DriverCalls& calls() const noexcept { return calls_; }

  [[nodiscard]] std::size_t free_bytes() const override {
    ++calls_.mem_get_info;
    return ForwardingBackend::free_bytes();
  }
  [[nodiscard]] void* reserve(std::size_t bytes) override {
    ++calls_.mem_alloc;
    return ForwardingBackend::reserve(bytes);
  }
  void release(void* base, std::size_t bytes) noexcept override {
    ++calls_.mem_free;
    ForwardingBackend::release(base, bytes);
  }
  [[nodiscard]] void* reserve_address_range(std::size_t bytes) override {
    ++calls_.address_reserve;
    return ForwardingBackend::reserve_address_range(bytes);
  }
  void release_address_range(void* base, std::size_t bytes) noexcept override {
    ++calls_.address_free;
    ForwardingBackend::release_address_range(base, bytes);
  }
  [[nodiscard]] bool map_pages(void* address, std::size_t bytes, std::size_t page) override {
    calls_.mem_create += bytes / page;
    calls_.mem_map += bytes / page;
    ++calls_.mem_set_access;
    calls_.mappings_given_access += bytes / page;
    return ForwardingBackend::map_pages(address, bytes, page);
  }
  void unmap_pages(void* address, std::size_t bytes, std::size_t page,
                   StreamId stream) noexcept override {
    ++calls_.stream_synchronize;
    calls_.mem_unmap += bytes / page;
    calls_.mem_release += bytes / page;
    ForwardingBackend::unmap_pages(address, bytes, page, stream);
  }
  [[nodiscard]] bool move_pages(void* from, void* to, std::size_t bytes, std::size_t page,
                                StreamId stream) override {
    ++calls_.stream_synchronize;
    calls_.mem_unmap += bytes / page;
    calls_.mem_map += bytes / page;
    ++calls_.mem_set_access;
    calls_.mappings_given_access += bytes / page;
    return ForwardingBackend::move_pages(from, to, bytes, page, stream);
  }

 private:
  mutable DriverCalls calls_;
};

}  // namespace memscope::bench
