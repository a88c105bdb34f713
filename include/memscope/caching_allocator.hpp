// CachingAllocator: a caching allocator over any Backend, with the semantics of PyTorch's CUDA
// caching allocator, statistics in torch.cuda.memory_stats() vocabulary, independent peak
// scopes and an empty_cache() that really returns memory to the backend.
//
// Blocks are carved from segments reserved on the backend, cached when freed, and reused by
// later requests on the same stream (best fit). The size rules live in docs/size-rules.md.
//
// Thread safety: every method may be called from any thread (one internal lock, see
// detail/futex_mutex.hpp).
// Ownership: the allocator owns its segments; destroying it releases all of them, including
// those still holding live allocations, so it must outlive every pointer it handed out and
// every PeakScope opened on it.
// Errors: allocate() throws OutOfMemoryError after flushing the cache and retrying (the
// allocator stays usable); record_stream() throws InvalidPointerError for a pointer that is not
// live. deallocate() and the destructor never throw.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "memscope/backend.hpp"
#include "memscope/config.hpp"
#include "memscope/detail/futex_mutex.hpp"
#include "memscope/errors.hpp"
#include "memscope/peak_scope.hpp"
#include "memscope/recording.hpp"
#include "memscope/snapshot.hpp"
#include "memscope/stats.hpp"
#include "memscope/trace_events.hpp"

namespace memscope {

class AllocatorCore;

class CachingAllocator {
 public:
  // Called on a cache miss before reserving more memory; returns true if it released memory
  // that might now be reusable (e.g. it dropped references held elsewhere). Called under the
  // allocator's lock: it must not call back into this allocator.
  using FreeMemoryCallback = std::function<bool()>;
  // Called after an OutOfMemoryError is built and the lock released, before it is thrown.
  using OomObserver = std::function<void(const OutOfMemoryError&)>;

  explicit CachingAllocator(std::shared_ptr<Backend> backend,
                            const AllocatorConfig& config = AllocatorConfig::from_env());
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;
  ~CachingAllocator() noexcept;

  // A block of at least `bytes` bytes, 512-byte aligned, usable on `stream`. nullptr for 0.
  [[nodiscard]] void* allocate(std::size_t bytes, StreamId stream = kDefaultStream);
  // allocate(), but out of memory returns nullptr instead of throwing: the same release and
  // retry, statistics and recording, and the observers are told as before (with the error
  // allocate() would throw, built only when there are observers). For callers that expect many
  // refusals: a replay past the device's capacity, where an exception per refused allocation
  // cost more than the rest of the replay (issue 44). Other errors throw as from allocate().
  [[nodiscard]] void* try_allocate(std::size_t bytes, StreamId stream = kDefaultStream);
  // Returns the block to the cache. A pointer that is not live is counted in num_invalid_frees,
  // reported once on stderr, and otherwise ignored. nullptr is a no-op.
  void deallocate(void* ptr) noexcept;
  // Like deallocate(), but says whether `ptr` was a live allocation instead of reporting it.
  [[nodiscard]] bool try_deallocate(void* ptr) noexcept;
  // Marks `ptr` as used by work on `stream`: after it is freed it is not reused until the work
  // queued on `stream` so far has completed.
  void record_stream(void* ptr, StreamId stream);
  // Size and requested size of a live allocation, or {0, 0} when `ptr` is not live.
  struct Allocation {
    std::size_t size = 0;
    std::size_t requested_size = 0;
    StreamId stream = kDefaultStream;
  };
  [[nodiscard]] Allocation lookup(const void* ptr) const;

  // Waits for pending stream work, releases every cached segment that holds no live block to
  // the backend, and returns the bytes released.
  std::size_t empty_cache();

  [[nodiscard]] MemoryStats stats() const;
  // The `all` pool's current reserved, allocated and requested bytes: what stats() says of them,
  // in constant time. stats() first merges every stream's front-cached blocks (that changes
  // inactive_split, nothing here), a walk over the streams; a caller polling after every
  // operation with thousands of streams (a replay's series) made that quadratic. Thread-safe.
  struct CurrentBytes {
    std::int64_t reserved = 0;
    std::int64_t allocated = 0;
    std::int64_t requested = 0;
  };
  [[nodiscard]] CurrentBytes current_bytes() const;
  [[nodiscard]] std::map<std::string, std::int64_t> memory_stats() const;
  void reset_peak_stats();
  void reset_accumulated_stats();
  [[nodiscard]] std::string memory_summary() const;
  [[nodiscard]] Snapshot snapshot() const;
  // Checks every invariant of the allocator's bookkeeping (blocks tile their segments, the
  // cache holds exactly the free blocks, statistics match the blocks...) and throws
  // InternalError naming the broken one and the block or segment. Costs O(n log n) in the
  // blocks: for tests and debugging. Builds without NDEBUG, or with the CMake option
  // MEMSCOPE_VALIDATE=ON, run it after every allocate, free and empty_cache while at most 256
  // allocations are live, and after every (n / 256)-th with n live (a broken invariant then
  // ends the program from deallocate(), which cannot throw).
  void validate() const;

  // ---- Recording (docs/design.md, "Recording") ----
  // Starts recording afresh (an earlier log is dropped): every allocation, free, segment
  // reservation and release, empty_cache() and out-of-memory error, with the stream, sizes,
  // time, the calling thread's trace tag (trace_tag.hpp) and, when asked, the allocation's
  // stack. The newest options.max_entries events are kept. UsageError for max_entries 0.
  // Also started by the configuration (record_history, record_stacks).
  void start_recording(const RecordingOptions& options = {});
  // Stops recording; the log stays for recorded_snapshot() until the next start_recording().
  void stop_recording() noexcept;
  // Whether events are being recorded; whether with Python stacks (a front end that releases
  // the GIL around allocate() captures them beforehand, see recording.hpp). Lock-free.
  [[nodiscard]] bool recording() const noexcept {
    return recording_.load(std::memory_order_relaxed);
  }
  [[nodiscard]] bool recording_python_stacks() const noexcept {
    return recording_python_.load(std::memory_order_relaxed);
  }
  // The segments now (snapshot(), with the stacks of live blocks allocated while recording) and
  // the recorded events, oldest first, as device_traces[0]; frames symbolized, dropped_events
  // counted, settings = config().to_string(). Without a log, device_traces[0] is empty.
  [[nodiscard]] TorchSnapshot recorded_snapshot() const;

  // Opens a peak window; see peak_scope.hpp.
  [[nodiscard]] PeakScope peak_scope();

  void add_free_memory_callback(FreeMemoryCallback callback);
  void add_oom_observer(OomObserver observer);

  // The most this allocator may reserve (from the config's memory_limit and the capacity).
  [[nodiscard]] std::size_t memory_limit() const;
  void set_memory_limit(std::size_t bytes);

  [[nodiscard]] Backend& backend() const noexcept { return *backend_; }
  [[nodiscard]] const std::shared_ptr<Backend>& backend_ptr() const noexcept { return backend_; }
  [[nodiscard]] const AllocatorConfig& config() const noexcept { return config_; }

 private:
  friend class PeakScope;
  void close_scope(PeakScope& scope) noexcept;
  [[nodiscard]] PeakValues scope_peak(const PeakScope& scope) const;
  void validate_if_debug();  // under the lock; nothing in release builds
  // allocate() after its hot path missed, with the lock held (it takes the lock over); when the
  // lock was taken (allocate_contended); after a hit that left a thread asleep on the lock.
  [[gnu::noinline]] void* allocate_locked(std::size_t bytes, StreamId stream);
  [[gnu::noinline]] void* allocate_contended(std::size_t bytes, StreamId stream);
  [[gnu::cold, gnu::noinline]] void* wake_one_and_return(void* p) noexcept;
  // deallocate() but its hot path, with the lock held (taken over); when the lock was taken.
  [[gnu::noinline]] void deallocate_locked(void* ptr) noexcept;
  [[gnu::noinline]] void deallocate_contended(void* ptr) noexcept;
  // After a failed allocation, under `held`: takes the figures, releases the lock, tells the
  // observers, throws. Out of line, so allocate()'s hot path holds no figures or observers.
  [[noreturn, gnu::cold, gnu::noinline]] void throw_oom(std::unique_lock<detail::FutexMutex> held);
  // The same, up to the throw: the error, after the observers saw it (the lock released).
  [[nodiscard]] OutOfMemoryError oom_error(std::unique_lock<detail::FutexMutex> held);

  std::shared_ptr<Backend> backend_;
  AllocatorConfig config_;
  mutable detail::FutexMutex mutex_;
  std::unique_ptr<AllocatorCore> core_;
  std::vector<OomObserver> oom_observers_;
  std::uint64_t changes_ = 0;           // allocator changes, for validate_if_debug()
  std::atomic<bool> recording_{false};  // mirror the core's recorder, for the queries above
  std::atomic<bool> recording_python_{false};
};

}  // namespace memscope
