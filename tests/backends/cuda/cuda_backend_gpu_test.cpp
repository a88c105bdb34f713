// The Backend contract on a real GPU: segments, out of memory, events, and leaving the caller's
// context alone. Skipped, with the reason, where no GPU can be used.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "backends/cuda/driver_loader.hpp"
#include "gpu_support.hpp"
#include "memscope/backend.hpp"
#include "memscope/cuda_backend.hpp"
#include "memscope/units.hpp"

namespace {

using memscope::CudaBackend;
using memscope::MiB;
using namespace std::chrono_literals;

TEST(CudaBackendGpu, DescribesTheDevice) {
  MEMSCOPE_REQUIRE_GPU();
  const auto backend = memscope::make_backend("cuda");
  EXPECT_EQ(backend->name(), "cuda:0");
  EXPECT_EQ(backend->memory_kind(), memscope::MemoryKind::device);
  EXPECT_GT(backend->capacity(), 0U);
  const std::size_t free = backend->free_bytes();
  EXPECT_GT(free, 0U);
  EXPECT_LE(free, backend->capacity());
  const auto& cuda = dynamic_cast<const CudaBackend&>(*backend);
  EXPECT_FALSE(cuda.device_name().empty());
  RecordProperty("device", cuda.device_name());
}

TEST(CudaBackendGpu, SegmentsAreAlignedUsableAndReleased) {
  MEMSCOPE_REQUIRE_GPU();
  CudaBackend backend(0);
  memscope::testing::GpuWork work(backend);
  std::vector<void*> segments;
  for (const std::size_t size : {2 * MiB, 20 * MiB, 64 * MiB}) {
    void* p = backend.reserve(size);
    ASSERT_NE(p, nullptr) << size;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 512, 0U);
    work.fill(p, 0x5a, size, memscope::kDefaultStream);
    const auto bytes = work.read(p, 4096);  // synchronous with the default stream
    for (const unsigned char b : bytes) ASSERT_EQ(b, 0x5a);
    segments.push_back(p);
  }
  backend.release(segments[0], 2 * MiB);
  backend.release(segments[1], 20 * MiB);
  backend.release(segments[2], 64 * MiB);
  backend.release(nullptr, 0);  // a no-op, not a crash
}

TEST(CudaBackendGpu, OutOfMemoryIsNullptrAndTheBackendStillWorks) {
  MEMSCOPE_REQUIRE_GPU();
  CudaBackend backend(0);
  EXPECT_EQ(backend.reserve(backend.capacity() + 1024 * MiB), nullptr);
  void* p = backend.reserve(2 * MiB);
  ASSERT_NE(p, nullptr);
  backend.release(p, 2 * MiB);
}

TEST(CudaBackendGpu, EventsFollowStreamWorkAndArePooled) {
  MEMSCOPE_REQUIRE_GPU();
  CudaBackend backend(0);
  memscope::testing::GpuWork work(backend);
  const memscope::StreamId stream = work.new_stream();
  const memscope::EventId event = backend.create_event();
  work.spin(stream, 300ms);
  backend.record_event(event, stream);
  EXPECT_FALSE(backend.query_event(event)) << "the spin kernel finished in under 300 ms";
  backend.synchronize_event(event);
  EXPECT_TRUE(backend.query_event(event));
  EXPECT_FALSE(work.busy(stream));

  const std::size_t pooled = backend.pooled_events();
  backend.destroy_event(event);
  EXPECT_EQ(backend.pooled_events(), pooled + 1);
  EXPECT_EQ(backend.create_event(), event) << "a pooled event is handed out again";
  EXPECT_EQ(backend.pooled_events(), pooled);
  // Recorded on the legacy default stream, with nothing queued: complete at once.
  backend.record_event(event, memscope::kDefaultStream);
  backend.synchronize_event(event);
  EXPECT_TRUE(backend.query_event(event));
  backend.destroy_event(event);
}

TEST(CudaBackendGpu, LeavesTheCallersContextAsItFoundIt) {
  MEMSCOPE_REQUIRE_GPU();
  CudaBackend backend(0);
  const memscope::detail::CudaDriver& driver = *memscope::detail::cuda_driver().driver;
  // A fresh thread has no current context; after our calls it must still have none.
  std::thread([&] {
    void* p = backend.reserve(2 * MiB);
    const memscope::EventId e = backend.create_event();
    backend.record_event(e, memscope::kDefaultStream);
    backend.synchronize_event(e);
    backend.destroy_event(e);
    (void)backend.free_bytes();
    backend.release(p, 2 * MiB);
    memscope::cu::CUcontext current = nullptr;
    EXPECT_EQ(driver.cuCtxGetCurrent(&current), memscope::cu::CUDA_SUCCESS);
    EXPECT_EQ(current, nullptr);
  }).join();
}

TEST(CudaBackendGpu, BackendsOnOneDeviceShareThePrimaryContext) {
  MEMSCOPE_REQUIRE_GPU();
  const CudaBackend a(0);
  const CudaBackend b(0);
  EXPECT_EQ(a.context(), b.context());
  EXPECT_NE(a.context(), 0U);
}

TEST(CudaBackendGpu, ConcurrentReserveAndReleaseFromManyThreads) {
  MEMSCOPE_REQUIRE_GPU();
  CudaBackend backend(0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&backend] {
      for (int i = 0; i < 50; ++i) {
        void* p = backend.reserve(2 * MiB);
        ASSERT_NE(p, nullptr);
        const memscope::EventId e = backend.create_event();
        backend.record_event(e, memscope::kDefaultStream);
        backend.synchronize_event(e);
        backend.destroy_event(e);
        backend.release(p, 2 * MiB);
      }
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace
