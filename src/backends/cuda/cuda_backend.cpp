// CudaBackend: segments from cuMemAlloc in the retained primary context, pooled events.
#include "memscope/cuda_backend.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <vector>

#include "backends/cuda/cuda_backend_state.hpp"
#include "backends/cuda/device_query.hpp"
#include "backends/cuda/driver_loader.hpp"
#include "backends/cuda/scoped_context.hpp"
#include "memscope/errors.hpp"

namespace memscope {

using detail::check_cuda;
using detail::CudaDriver;
using detail::to_event;
using detail::to_stream;

namespace {

// Events beyond this many idle ones are destroyed instead of pooled: a burst of pending frees
// should not pin driver objects for the rest of the run.
constexpr std::size_t kMaxPooledEvents = 1024;

}  // namespace

namespace detail {
// Release paths cannot throw; a failure there is a real driver fault (a sticky error after an
// illegal access, say), reported once so it is not lost and not repeated for every segment.
void report_release_failure(const CudaDriver& driver, cu::CUresult result, const char* what) {
  static std::atomic<bool> reported{false};
  if (result == cu::CUDA_ERROR_DEINITIALIZED || reported.exchange(true)) return;
  std::fprintf(stderr, "memscope: %s failed during release: %s (further failures not shown)\n",
               what, detail::describe_cuda_error(&driver, result).c_str());
}
}  // namespace detail

CudaBackend::CudaBackend(int device_index) : state_(std::make_unique<State>()) {
  detail::OpenedDevice opened = detail::open_cuda_device(device_index);  // throws if unavailable
  const CudaDriver& driver = *opened.driver;
  const std::string label =
      BackendSpec{.type = BackendSpec::Type::cuda, .device_index = device_index}.to_string();
  std::size_t total = 0;
  check_cuda(driver, driver.cuDeviceTotalMem(&total, opened.device), label + ": cuDeviceTotalMem");
  cu::CUcontext context = nullptr;
  const cu::CUresult retained = driver.cuDevicePrimaryCtxRetain(&context, opened.device);
  if (retained != cu::CUDA_SUCCESS) {
    // Exclusive-process mode held by another process, or no memory left for a context.
    throw BackendUnavailableError(label + ": cannot retain the device's primary context: " +
                                  detail::describe_cuda_error(&driver, retained));
  }
  state_->driver = std::move(opened.driver);
  state_->index = device_index;
  state_->device = opened.device;
  state_->context = context;
  state_->capacity = total;
  state_->device_name = std::move(opened.name);
  detail::probe_page_mapping(*state_);
}

CudaBackend::~CudaBackend() noexcept {
  if (detail::cuda_driver_shutting_down()) return;
  const CudaDriver& driver = *state_->driver;
  detail::release_all_pages(*state_);
  for (cu::CUevent event : state_->free_events) (void)driver.cuEventDestroy(event);
  (void)driver.cuDevicePrimaryCtxRelease(state_->device);
}

std::string CudaBackend::name() const {
  return BackendSpec{.type = BackendSpec::Type::cuda, .device_index = state_->index}.to_string();
}

std::size_t CudaBackend::capacity() const {
  return state_->capacity;
}

std::size_t CudaBackend::free_bytes() const {
  const CudaDriver& driver = *state_->driver;
  detail::ScopedContext scope(driver, state_->context);
  std::size_t free = 0;
  std::size_t total = 0;
  check_cuda(driver, driver.cuMemGetInfo(&free, &total), name() + ": cuMemGetInfo");
  return free;
}

void* CudaBackend::reserve(std::size_t bytes) {
  const CudaDriver& driver = *state_->driver;
  detail::ScopedContext scope(driver, state_->context);
  cu::CUdeviceptr pointer = 0;
  const cu::CUresult result = driver.cuMemAlloc(&pointer, bytes);
  // Out of memory is not an error here: the allocator frees its cache and retries, then builds
  // an OutOfMemoryError with its own figures.
  if (result == cu::CUDA_ERROR_OUT_OF_MEMORY) return nullptr;
  check_cuda(driver, result, name() + ": cuMemAlloc(" + std::to_string(bytes) + " bytes)");
  return reinterpret_cast<void*>(pointer);  // NOLINT(performance-no-int-to-ptr)
}

void CudaBackend::release(void* base, std::size_t /*bytes*/) noexcept {
  if (base == nullptr || detail::cuda_driver_shutting_down()) return;
  const CudaDriver& driver = *state_->driver;
  detail::ScopedContext scope(driver, state_->context, std::nothrow);
  if (!scope.ok()) return;
  const cu::CUresult result = driver.cuMemFree(reinterpret_cast<cu::CUdeviceptr>(base));
  if (result != cu::CUDA_SUCCESS) detail::report_release_failure(driver, result, "cuMemFree");
}

EventId CudaBackend::create_event() {
  {
    std::lock_guard lock(state_->events_mutex);
    if (!state_->free_events.empty()) {
      cu::CUevent event = state_->free_events.back();
      state_->free_events.pop_back();
      return reinterpret_cast<EventId>(event);
    }
  }
  const CudaDriver& driver = *state_->driver;
  detail::ScopedContext scope(driver, state_->context);
  cu::CUevent event = nullptr;
  // No timing: the allocator only asks "has the stream passed this point", and timing events
  // cost more to record and query.
  check_cuda(driver, driver.cuEventCreate(&event, cu::CU_EVENT_DISABLE_TIMING),
             name() + ": cuEventCreate");
  return reinterpret_cast<EventId>(event);
}

void CudaBackend::destroy_event(EventId event) noexcept {
  if (event == 0 || detail::cuda_driver_shutting_down()) return;
  try {
    std::lock_guard lock(state_->events_mutex);
    if (state_->free_events.size() < kMaxPooledEvents) {
      state_->free_events.push_back(to_event(event));
      return;
    }
  } catch (...) {  // push_back could not grow the pool: destroy the event instead
  }
  const cu::CUresult result = state_->driver->cuEventDestroy(to_event(event));
  if (result != cu::CUDA_SUCCESS)
    detail::report_release_failure(*state_->driver, result, "cuEventDestroy");
}

void CudaBackend::record_event(EventId event, StreamId stream) {
  const CudaDriver& driver = *state_->driver;
  // Stream 0 means the legacy default stream of the *current* context: make ours current.
  detail::ScopedContext scope(driver, state_->context);
  check_cuda(driver, driver.cuEventRecord(to_event(event), to_stream(stream)),
             name() + ": cuEventRecord");
}

bool CudaBackend::query_event(EventId event) {
  const CudaDriver& driver = *state_->driver;
  const cu::CUresult result = driver.cuEventQuery(to_event(event));
  if (result == cu::CUDA_ERROR_NOT_READY) return false;
  check_cuda(driver, result, name() + ": cuEventQuery");
  return true;
}

void CudaBackend::synchronize_event(EventId event) {
  const CudaDriver& driver = *state_->driver;
  check_cuda(driver, driver.cuEventSynchronize(to_event(event)), name() + ": cuEventSynchronize");
}

int CudaBackend::device_index() const noexcept {
  return state_->index;
}

std::string CudaBackend::device_name() const {
  return state_->device_name;
}

std::uintptr_t CudaBackend::context() const noexcept {
  return reinterpret_cast<std::uintptr_t>(state_->context);
}

std::size_t CudaBackend::pooled_events() const {
  std::lock_guard lock(state_->events_mutex);
  return state_->free_events.size();
}

}  // namespace memscope
