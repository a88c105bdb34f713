#include "memscope/caching_allocator.hpp"

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <vector>

#include "allocator/allocator_core.hpp"
#include "allocator/reports.hpp"

namespace memscope {
namespace {

// Debug builds (or MEMSCOPE_VALIDATE) check every invariant after every change; release
// builds compile the check away.
#if defined(MEMSCOPE_VALIDATE) || !defined(NDEBUG)
constexpr bool kValidateEachChange = true;
#else
constexpr bool kValidateEachChange = false;
#endif
// validate() walks every block: with n live allocations above this, debug builds check after
// every (n / kValidateAllUpTo)-th change only, so a program holding thousands of blocks still
// runs (amortised O(kValidateAllUpTo) per call instead of O(n)).
constexpr std::size_t kValidateAllUpTo = 256;

// fork() safety. A child process has only the thread that called fork(): a mutex another thread
// held at that moment stays locked in the child forever, and its first allocation deadlocks.
// So around fork() (pthread_atfork) the forking thread takes every live allocator's mutex,
// which waits until no other thread is inside an allocator, and releases them on both sides.
//
// Lock order: the registry's mutex, then the allocators' (never the other way: constructors
// and destructors take only the registry's). The allocators' mutexes have no order among
// themselves (a free-memory callback under one may free into another), so prepare() takes
// them like std::lock: blocking on one, only trying the others, starting over on a failure.
// Handlers of layers whose locks are taken before an allocator's (the tracker, the Python
// registry) must run their prepare first, that is be registered later: pthread_atfork runs
// prepare handlers in reverse order of registration. Ours are registered while the library
// initialises (kForkHandlersRegistered below), before any code can register a later layer's.
struct ForkRegistry {
  std::mutex mutex;
  std::vector<detail::FutexMutex*> allocators;  // the locks of live allocators
};

void lock_all(const std::vector<detail::FutexMutex*>& mutexes) noexcept;
void unlock_all() noexcept;

ForkRegistry& fork_registry() {
  // Never destroyed: allocators with static storage may be destroyed after it would be.
  static ForkRegistry* const registry = [] {
    auto* r = new ForkRegistry;
    pthread_atfork(
        [] {
          fork_registry().mutex.lock();
          lock_all(fork_registry().allocators);
        },
        unlock_all, unlock_all);  // parent and child alike: the forking thread holds them all
    return r;
  }();
  return *registry;
}

void lock_all(const std::vector<detail::FutexMutex*>& mutexes) noexcept {
  const std::size_t n = mutexes.size();
  std::size_t first = 0;
  while (n > 0) {
    mutexes[first]->lock();
    std::size_t failed = n;
    for (std::size_t i = 0; i < n && failed == n; ++i) {
      if (i != first && !mutexes[i]->try_lock()) failed = i;
    }
    if (failed == n) return;
    for (std::size_t i = 0; i < failed; ++i) {
      if (i != first) mutexes[i]->unlock();
    }
    mutexes[first]->unlock();
    first = failed;  // wait for the one that was busy, then try the rest again
  }
}

void unlock_all() noexcept {
  ForkRegistry& registry = fork_registry();
  for (auto it = registry.allocators.rbegin(); it != registry.allocators.rend(); ++it) {
    (*it)->unlock();
  }
  registry.mutex.unlock();
}

bool register_fork_handlers() noexcept {
  try {
    (void)fork_registry();
  } catch (...) {  // out of memory while the library loads: the first allocator retries
  }
  return true;
}

[[maybe_unused]] const bool kForkHandlersRegistered = register_fork_handlers();

}  // namespace

void CachingAllocator::validate_if_debug() {
  if constexpr (kValidateEachChange) {
    const std::size_t every = 1 + core_->statistics().live_allocations() / kValidateAllUpTo;
    if (++changes_ % every == 0) core_->validate();
  }
}

CachingAllocator::CachingAllocator(std::shared_ptr<Backend> backend, const AllocatorConfig& config)
    : backend_(std::move(backend)), config_(config) {
  if (!backend_) throw UsageError("CachingAllocator: the backend must not be null");
  core_ = std::make_unique<AllocatorCore>(*backend_, config_);
  if (config_.record_history > 0) {
    start_recording({.max_entries = config_.record_history,
                     .cpp_stacks = config_.record_cpp_stacks,
                     .python_stacks = config_.record_python_stacks});
  }
  ForkRegistry& registry = fork_registry();
  const std::lock_guard lock(registry.mutex);
  registry.allocators.push_back(&mutex_);
}

CachingAllocator::~CachingAllocator() noexcept {
  ForkRegistry& registry = fork_registry();
  const std::lock_guard lock(registry.mutex);
  auto& live = registry.allocators;
  const auto it = std::find(live.begin(), live.end(), &mutex_);
  if (it != live.end()) {
    *it = live.back();
    live.pop_back();
  }
}

void* CachingAllocator::allocate(std::size_t bytes, StreamId stream) {
  if (bytes == 0) return nullptr;
  // A cache hit, inline and unable to throw, calls nothing: no lock object, and every other
  // case (a contended lock, a miss, a waiter to wake) is a tail call, so the hit saves no
  // registers.
  if (!mutex_.try_lock()) [[unlikely]]
    return allocate_contended(bytes, stream);
  if constexpr (!kValidateEachChange) {
    if (void* p = core_->reuse(bytes, stream)) [[likely]] {
      if (mutex_.unlock_leaves_waiters()) [[unlikely]]
        return wake_one_and_return(p);
      return p;
    }
  }
  return allocate_locked(bytes, stream);
}

void* CachingAllocator::allocate_contended(std::size_t bytes, StreamId stream) {
  mutex_.lock();
  return allocate_locked(bytes, stream);
}

void* CachingAllocator::wake_one_and_return(void* p) noexcept {
  mutex_.wake_one();
  return p;
}

void* CachingAllocator::allocate_locked(std::size_t bytes, StreamId stream) {
  std::unique_lock lock(mutex_, std::adopt_lock);
  if (void* p = core_->allocate_slow(bytes, stream)) {
    validate_if_debug();
    return p;
  }
  throw_oom(std::move(lock));
}

void CachingAllocator::throw_oom(std::unique_lock<detail::FutexMutex> held) {
  throw oom_error(std::move(held));
}

OutOfMemoryError CachingAllocator::oom_error(std::unique_lock<detail::FutexMutex> held) {
  validate_if_debug();  // the failed attempt released every cached segment
  const OutOfMemoryError::Figures figures = core_->oom_figures();
  std::vector<OomObserver> observers = oom_observers_;
  held.unlock();
  // Observers run without the lock, so they may inspect or free memory of this allocator.
  OutOfMemoryError error(detail::format_oom_message(figures, backend_->name(), config_), figures);
  for (const auto& observe : observers) observe(error);
  return error;
}

void* CachingAllocator::try_allocate(std::size_t bytes, StreamId stream) {
  if (bytes == 0) return nullptr;
  // A hit as in allocate() (a replay's most common op), the miss under the lock held.
  if (!mutex_.try_lock()) [[unlikely]]
    mutex_.lock();
  if constexpr (!kValidateEachChange) {
    if (void* p = core_->reuse(bytes, stream)) [[likely]] {
      if (mutex_.unlock_leaves_waiters()) [[unlikely]]
        return wake_one_and_return(p);
      return p;
    }
  }
  std::unique_lock lock(mutex_, std::adopt_lock);
  if (void* p = core_->allocate_slow(bytes, stream)) {
    validate_if_debug();
    return p;
  }
  if (oom_observers_.empty()) {
    validate_if_debug();
    return nullptr;
  }
  (void)oom_error(std::move(lock));
  return nullptr;
}

bool CachingAllocator::try_deallocate(void* ptr) noexcept {
  if (ptr == nullptr) return true;
  const std::lock_guard lock(mutex_);
  if (core_->deallocate(ptr)) {
    validate_if_debug();
    return true;
  }
  core_->count_invalid_free();
  return false;
}

void CachingAllocator::deallocate(void* ptr) noexcept {
  if (ptr == nullptr) return;
  // As allocate(): a free into the front cache is inline and calls nothing; every other case is
  // a tail call.
  if (!mutex_.try_lock()) [[unlikely]]
    return deallocate_contended(ptr);
  if constexpr (!kValidateEachChange) {
    if (core_->free_to_front_cache(ptr)) [[likely]] {
      if (mutex_.unlock_leaves_waiters()) [[unlikely]]
        return mutex_.wake_one();
      return;
    }
  }
  deallocate_locked(ptr);
}

void CachingAllocator::deallocate_contended(void* ptr) noexcept {
  mutex_.lock();
  deallocate_locked(ptr);
}

namespace {

// A double free or a foreign pointer is a bug in the caller; say so once, never crash.
[[gnu::cold, gnu::noinline]] void report_invalid_free(void* ptr) noexcept {
  static std::once_flag reported;
  std::call_once(reported, [ptr] {
    std::fprintf(stderr,
                 "memscope: deallocate(%p): not a live allocation of this allocator (double free "
                 "or foreign pointer); ignored. Further cases are counted in num_invalid_frees.\n",
                 ptr);
  });
}

}  // namespace

void CachingAllocator::deallocate_locked(void* ptr) noexcept {
  std::unique_lock lock(mutex_, std::adopt_lock);
  if (core_->deallocate(ptr)) {
    validate_if_debug();
    return;
  }
  core_->count_invalid_free();
  lock.unlock();
  report_invalid_free(ptr);
}

void CachingAllocator::record_stream(void* ptr, StreamId stream) {
  const std::lock_guard lock(mutex_);
  core_->record_stream(ptr, stream);
}

CachingAllocator::Allocation CachingAllocator::lookup(const void* ptr) const {
  const std::lock_guard lock(mutex_);
  const detail::Block* block = core_->find(ptr);
  if (block == nullptr) return {};
  return {block->size, block->requested_size, block->stream()};
}

std::size_t CachingAllocator::empty_cache() {
  const std::lock_guard lock(mutex_);
  const std::size_t released = core_->empty_cache();
  validate_if_debug();
  return released;
}

void CachingAllocator::validate() const {
  const std::lock_guard lock(mutex_);
  core_->validate();
}

MemoryStats CachingAllocator::stats() const {
  const std::lock_guard lock(mutex_);
  // Blocks in the front cache count in inactive_split once merged: merge them now, so every
  // statistic is what merging at each free would have made it (docs/design.md, "Hot path").
  if (core_->has_recent()) core_->flush_recent();
  return core_->stats();
}

CachingAllocator::CurrentBytes CachingAllocator::current_bytes() const {
  const std::lock_guard lock(mutex_);
  // {allocated, reserved, active, requested}: exact without merging the front caches.
  const auto now = core_->statistics().peak_counters();
  return {.reserved = now[1], .allocated = now[0], .requested = now[3]};
}

std::map<std::string, std::int64_t> CachingAllocator::memory_stats() const {
  return stats().flatten();
}

void CachingAllocator::reset_peak_stats() {
  const std::lock_guard lock(mutex_);
  if (core_->has_recent()) core_->flush_recent();  // peaks start from the merged values
  core_->reset_peak_stats();
}

void CachingAllocator::reset_accumulated_stats() {
  const std::lock_guard lock(mutex_);
  core_->reset_accumulated_stats();
}

std::string CachingAllocator::memory_summary() const {
  return detail::format_memory_summary(stats(), backend_->name());
}

Snapshot CachingAllocator::snapshot() const {
  const std::lock_guard lock(mutex_);
  if (core_->has_recent()) core_->flush_recent();  // the layout agrees with stats()
  return core_->snapshot();
}

void CachingAllocator::start_recording(const RecordingOptions& options) {
  const std::lock_guard lock(mutex_);
  core_->start_recording(options);
  recording_.store(true, std::memory_order_relaxed);
  recording_python_.store(options.python_stacks, std::memory_order_relaxed);
}

void CachingAllocator::stop_recording() noexcept {
  const std::lock_guard lock(mutex_);
  core_->stop_recording();
  recording_.store(false, std::memory_order_relaxed);
  recording_python_.store(false, std::memory_order_relaxed);
}

TorchSnapshot CachingAllocator::recorded_snapshot() const {
  TorchSnapshot out;
  const std::lock_guard lock(mutex_);
  if (core_->has_recent()) core_->flush_recent();
  Snapshot snap = core_->snapshot();
  out.settings = std::move(snap.settings);
  out.segments.reserve(snap.segments.size());
  for (SegmentInfo& info : snap.segments) {
    TorchSegment segment;
    segment.info = std::move(info);
    out.segments.push_back(std::move(segment));
  }
  out.device_traces.resize(1);
  if (const detail::Recorder* recorder = core_->recorder()) recorder->export_to(out);
  return out;
}

PeakScope CachingAllocator::peak_scope() {
  auto window = std::make_unique<PeakScope::Windows::Window>();
  const std::lock_guard lock(mutex_);
  core_->open_window(*window);
  return PeakScope(this, std::move(window));
}

void CachingAllocator::close_scope(PeakScope& scope) noexcept {
  const std::lock_guard lock(mutex_);
  if (scope.window_->open) core_->close_window(*scope.window_);
}

PeakValues CachingAllocator::scope_peak(const PeakScope& scope) const {
  const std::lock_guard lock(mutex_);
  const auto v = scope.window_->open ? core_->statistics().windows().peak(*scope.window_)
                                     : scope.window_->record;
  return {v[0], v[1], v[2], v[3]};
}

void CachingAllocator::add_free_memory_callback(FreeMemoryCallback callback) {
  const std::lock_guard lock(mutex_);
  core_->add_free_memory_callback(std::move(callback));
}

void CachingAllocator::add_oom_observer(OomObserver observer) {
  const std::lock_guard lock(mutex_);
  oom_observers_.push_back(std::move(observer));
}

std::size_t CachingAllocator::memory_limit() const {
  const std::lock_guard lock(mutex_);
  return core_->memory_limit();
}

void CachingAllocator::set_memory_limit(std::size_t bytes) {
  const std::lock_guard lock(mutex_);
  core_->set_memory_limit(bytes);
}

// PeakScope lives here: it is a thin handle on its allocator's windows.

PeakScope& PeakScope::operator=(PeakScope&& other) noexcept {
  if (this != &other) {
    close();
    owner_ = other.owner_;
    window_ = std::move(other.window_);
    other.owner_ = nullptr;
  }
  return *this;
}

PeakValues PeakScope::peak() const {
  if (!window_) return {};
  if (owner_ == nullptr) {
    const auto& v = window_->record;
    return {v[0], v[1], v[2], v[3]};
  }
  return owner_->scope_peak(*this);
}

PeakValues PeakScope::begin() const noexcept {
  if (!window_) return {};
  const auto& v = window_->begin;
  return {v[0], v[1], v[2], v[3]};
}

void PeakScope::close() noexcept {
  if (owner_ != nullptr && window_ && window_->open) owner_->close_scope(*this);
}

}  // namespace memscope
