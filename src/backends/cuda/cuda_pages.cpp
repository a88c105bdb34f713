// CudaBackend's page mapping (backend.hpp) through the driver's virtual memory management:
// cuMemAddressReserve holds an address range, cuMemCreate makes one physical allocation per
// page (so pages unmap one by one), cuMemMap/cuMemSetAccess put it into the range, and
// cuMemUnmap/cuMemRelease give it back. A move maps the same physical handle at the new
// address: no new memory, no copy.
#include <fmt/format.h>

#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend_state.hpp"
#include "backends/cuda/scoped_context.hpp"
#include "backends/page_args.hpp"
#include "memscope/errors.hpp"

namespace memscope {

using detail::check_cuda;
using detail::CudaDriver;
using detail::to_stream;

namespace {

cu::CUdeviceptr to_device(const void* p) noexcept {
  return reinterpret_cast<cu::CUdeviceptr>(p);
}

// Pinned device memory on `device`, not exportable: what cuMemAlloc gives, page by page.
cu::CUmemAllocationProp device_memory(cu::CUdevice device) noexcept {
  cu::CUmemAllocationProp prop{};
  prop.type = cu::CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = cu::CU_MEM_HANDLE_TYPE_NONE;
  prop.location.type = cu::CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

cu::CUmemAccessDesc read_write(cu::CUdevice device) noexcept {
  cu::CUmemAccessDesc access{};
  access.location.type = cu::CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = cu::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return access;
}

// The first of the functions page mapping needs that the driver lacks; nullptr when none.
const char* missing_function(const CudaDriver& d) noexcept {
  if (d.cuMemGetAllocationGranularity == nullptr) return "cuMemGetAllocationGranularity";
  if (d.cuMemAddressReserve == nullptr) return "cuMemAddressReserve";
  if (d.cuMemAddressFree == nullptr) return "cuMemAddressFree";
  if (d.cuMemCreate == nullptr) return "cuMemCreate";
  if (d.cuMemRelease == nullptr) return "cuMemRelease";
  if (d.cuMemMap == nullptr) return "cuMemMap";
  if (d.cuMemUnmap == nullptr) return "cuMemUnmap";
  if (d.cuMemSetAccess == nullptr) return "cuMemSetAccess";
  if (d.cuStreamSynchronize == nullptr) return "cuStreamSynchronize";
  return nullptr;
}

// Unmaps and releases one page; never throws.
void drop_page(const CudaDriver& driver, std::uintptr_t address,
               const CudaBackend::State::MappedPage& page) noexcept {
  const cu::CUresult unmapped = driver.cuMemUnmap(address, page.bytes);
  if (unmapped != cu::CUDA_SUCCESS) detail::report_release_failure(driver, unmapped, "cuMemUnmap");
  // Releasing the handle frees the memory once no mapping uses it.
  const cu::CUresult released = driver.cuMemRelease(page.handle);
  if (released != cu::CUDA_SUCCESS) {
    detail::report_release_failure(driver, released, "cuMemRelease");
  }
}

// True when a page is recorded anywhere in [begin, end). Under pages_mutex.
bool any_page_in(const CudaBackend::State& state, std::uintptr_t begin, std::uintptr_t end) {
  auto next = state.pages.lower_bound(begin);
  if (next != state.pages.end() && next->first < end) return true;
  return next != state.pages.begin() &&
         std::prev(next)->first + std::prev(next)->second.bytes > begin;
}

}  // namespace

namespace detail {

void probe_page_mapping(CudaBackend::State& state) {
  const CudaDriver& driver = *state.driver;
  if (const char* missing = missing_function(driver)) {
    state.page_mapping_note = fmt::format(
        "the CUDA driver (version {}) lacks {}: expandable segments need a driver with virtual "
        "memory management (CUDA 10.2 or newer)",
        driver.version, missing);
    return;
  }
  if (driver.cuDeviceGetAttribute != nullptr) {
    int supported = 0;
    const cu::CUresult result = driver.cuDeviceGetAttribute(
        &supported, cu::CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, state.device);
    if (result == cu::CUDA_SUCCESS && supported == 0) {
      state.page_mapping_note =
          "device " + state.device_name + " does not support virtual memory management (cuMemMap)";
      return;
    }
  }
  detail::ScopedContext scope(driver, state.context, std::nothrow);
  if (!scope.ok()) {
    state.page_mapping_note = "the device's primary context could not be made current";
    return;
  }
  const cu::CUmemAllocationProp prop = device_memory(state.device);
  std::size_t granularity = 0;
  const cu::CUresult result = driver.cuMemGetAllocationGranularity(
      &granularity, &prop, cu::CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (result != cu::CUDA_SUCCESS || granularity == 0 || (granularity & (granularity - 1)) != 0) {
    state.page_mapping_note =
        "cuMemGetAllocationGranularity answered " +
        (result != cu::CUDA_SUCCESS ? describe_cuda_error(&driver, result)
                                    : std::to_string(granularity) + " (not a power of two)");
    return;
  }
  state.granularity = granularity;
}

void release_all_pages(CudaBackend::State& state) noexcept {
  if (state.granularity == 0) return;
  const CudaDriver& driver = *state.driver;
  detail::ScopedContext scope(driver, state.context, std::nothrow);
  if (!scope.ok()) return;  // the process is going away with its device memory anyway
  const std::lock_guard lock(state.pages_mutex);
  for (const auto& [address, page] : state.pages) drop_page(driver, address, page);
  state.pages.clear();
  for (const auto& [base, bytes] : state.ranges) (void)driver.cuMemAddressFree(base, bytes);
  state.ranges.clear();
}

}  // namespace detail

std::size_t CudaBackend::page_granularity() const noexcept {
  return state_->granularity;
}

const std::string& CudaBackend::page_mapping_note() const noexcept {
  return state_->page_mapping_note;
}

void* CudaBackend::reserve_address_range(std::size_t bytes) {
  if (state_->granularity == 0) return Backend::reserve_address_range(bytes);  // refuses
  detail::check_range_size(name(), "reserve_address_range", bytes, state_->granularity);
  const CudaDriver& driver = *state_->driver;
  detail::ScopedContext scope(driver, state_->context);
  cu::CUdeviceptr base = 0;
  const cu::CUresult result = driver.cuMemAddressReserve(&base, bytes, state_->granularity, 0, 0);
  if (result == cu::CUDA_ERROR_OUT_OF_MEMORY) return nullptr;
  check_cuda(driver, result, fmt::format("{}: cuMemAddressReserve({} bytes)", name(), bytes));
  const std::lock_guard lock(state_->pages_mutex);
  state_->ranges.emplace(base, bytes);
  return reinterpret_cast<void*>(base);  // NOLINT(performance-no-int-to-ptr)
}

void CudaBackend::release_address_range(void* base, std::size_t bytes) noexcept {
  if (base == nullptr || state_->granularity == 0 || detail::cuda_driver_shutting_down()) return;
  const CudaDriver& driver = *state_->driver;
  detail::ScopedContext scope(driver, state_->context, std::nothrow);
  if (!scope.ok()) return;
  const std::uintptr_t begin = to_device(base);
  const std::lock_guard lock(state_->pages_mutex);
  // Pages the caller left mapped go with the range (cuMemAddressFree refuses a mapped range).
  for (auto page = state_->pages.lower_bound(begin);
       page != state_->pages.end() && page->first < begin + bytes;) {
    drop_page(driver, page->first, page->second);
    page = state_->pages.erase(page);
  }
  state_->ranges.erase(begin);
  const cu::CUresult result = driver.cuMemAddressFree(begin, bytes);
  if (result != cu::CUDA_SUCCESS) {
    detail::report_release_failure(driver, result, "cuMemAddressFree");
  }
}

bool CudaBackend::map_pages(void* address, std::size_t bytes, std::size_t page) {
  if (state_->granularity == 0) return Backend::map_pages(address, bytes, page);  // refuses
  const std::string label = name();
  detail::check_page_args(label, "map_pages", address, bytes, page, state_->granularity);
  // No cuMemGetInfo first (7 us on an H200, docs/gpu.md "Where mapping time goes", on every
  // growth). More than the whole device is refused at once; anything else the driver refuses,
  // and the pages made so far are undone.
  if (bytes > state_->capacity) return false;
  const CudaDriver& driver = *state_->driver;
  detail::ScopedContext scope(driver, state_->context);
  const std::uintptr_t begin = to_device(address);
  const std::lock_guard lock(state_->pages_mutex);
  if (any_page_in(*state_, begin, begin + bytes)) {
    throw BackendError(detail::describe_page_call(label, "map_pages", address, bytes, page) +
                       ": part of it is mapped already; unmap it first (a caller's bug)");
  }
  const cu::CUmemAllocationProp prop = device_memory(state_->device);
  std::vector<std::pair<std::uintptr_t, State::MappedPage>> done;
  done.reserve(bytes / page);
  // Undoes this call's pages; the result tells out of memory (false) from other failures.
  auto fail = [&](cu::CUresult result, const char* call) {
    for (const auto& [at, mapped] : done) drop_page(driver, at, mapped);
    if (result == cu::CUDA_ERROR_OUT_OF_MEMORY) return false;
    check_cuda(driver, result,
               detail::describe_page_call(label, "map_pages", address, bytes, page) + ": " + call);
    return false;  // not reached: check_cuda threw
  };
  for (std::size_t offset = 0; offset < bytes; offset += page) {
    State::MappedPage mapped{.handle = 0, .bytes = page};
    cu::CUresult result = driver.cuMemCreate(&mapped.handle, page, &prop, 0);
    if (result != cu::CUDA_SUCCESS) return fail(result, "cuMemCreate");
    result = driver.cuMemMap(begin + offset, page, 0, mapped.handle, 0);
    if (result != cu::CUDA_SUCCESS) {
      (void)driver.cuMemRelease(mapped.handle);
      return fail(result, "cuMemMap");
    }
    done.emplace_back(begin + offset, mapped);
  }
  // One access call for the whole span: it may cover several mappings.
  const cu::CUmemAccessDesc access = read_write(state_->device);
  const cu::CUresult result = driver.cuMemSetAccess(begin, bytes, &access, 1);
  if (result != cu::CUDA_SUCCESS) return fail(result, "cuMemSetAccess");
  for (const auto& [at, mapped] : done) state_->pages.emplace(at, mapped);
  return true;
}

void CudaBackend::unmap_pages(void* address, std::size_t bytes, std::size_t /*page*/,
                              StreamId stream) noexcept {
  if (address == nullptr || state_->granularity == 0 || detail::cuda_driver_shutting_down()) {
    return;
  }
  const CudaDriver& driver = *state_->driver;
  detail::ScopedContext scope(driver, state_->context, std::nothrow);
  if (!scope.ok()) return;
  // Unmapping does not wait for kernels queued on the memory: wait for the stream first.
  const cu::CUresult synced = driver.cuStreamSynchronize(to_stream(stream));
  if (synced != cu::CUDA_SUCCESS) {
    detail::report_release_failure(driver, synced, "cuStreamSynchronize");
    return;  // the pages stay mapped: unmapping under running work could fault it
  }
  const std::uintptr_t begin = to_device(address);
  const std::uintptr_t end = begin + bytes;
  const std::lock_guard lock(state_->pages_mutex);
  for (auto page = state_->pages.lower_bound(begin);
       page != state_->pages.end() && page->first < end;) {
    if (page->first + page->second.bytes > end) break;  // only whole pages, as mapped
    drop_page(driver, page->first, page->second);
    page = state_->pages.erase(page);
  }
}

bool CudaBackend::move_pages(void* from, void* to, std::size_t bytes, std::size_t page,
                             StreamId stream) {
  if (state_->granularity == 0) return Backend::move_pages(from, to, bytes, page, stream);
  const std::string label = name();
  detail::check_page_args(label, "move_pages", from, bytes, page, state_->granularity);
  detail::check_page_args(label, "move_pages", to, bytes, page, state_->granularity);
  const std::uintptr_t source = to_device(from);
  const std::uintptr_t target = to_device(to);
  const CudaDriver& driver = *state_->driver;
  detail::ScopedContext scope(driver, state_->context);
  // Kernels queued on the stream may still use the pages where they are. (Waited for before
  // taking the lock, so other threads' page calls do not wait for this stream too.)
  check_cuda(driver, driver.cuStreamSynchronize(to_stream(stream)),
             label + ": cuStreamSynchronize before move_pages");
  const std::lock_guard lock(state_->pages_mutex);
  // The source must be whole pages, all mapped; the destination free.
  std::vector<std::map<std::uintptr_t, State::MappedPage>::iterator> moving;
  std::uintptr_t expected = source;
  for (auto it = state_->pages.lower_bound(source);
       it != state_->pages.end() && it->first < source + bytes; ++it) {
    if (it->first != expected) break;
    expected += it->second.bytes;
    moving.push_back(it);
  }
  const char* problem = nullptr;
  if (expected != source + bytes) {
    problem = "the source is not whole mapped pages";
  } else if (any_page_in(*state_, target, target + bytes)) {
    problem = "part of the destination is mapped already";
  }
  if (problem != nullptr) {
    throw BackendError(fmt::format(
        "{} to {:#x}: {} (a caller's bug)",
        detail::describe_page_call(label, "move_pages", from, bytes, page), target, problem));
  }
  for (const auto& it : moving) {
    const std::uintptr_t at = target + (it->first - source);
    const State::MappedPage mapped = it->second;
    const std::string what =
        detail::describe_page_call(label, "move_pages", from, bytes, page) + ": ";
    check_cuda(driver, driver.cuMemUnmap(it->first, mapped.bytes), what + "cuMemUnmap");
    state_->pages.erase(it);
    const cu::CUresult result = driver.cuMemMap(at, mapped.bytes, 0, mapped.handle, 0);
    if (result != cu::CUDA_SUCCESS) {
      (void)driver.cuMemRelease(mapped.handle);  // its memory is lost to the caller either way
      check_cuda(driver, result, what + "cuMemMap (this page's memory was freed)");
    }
    state_->pages.emplace(at, mapped);
  }
  const cu::CUmemAccessDesc access = read_write(state_->device);
  check_cuda(driver, driver.cuMemSetAccess(target, bytes, &access, 1),
             label + ": cuMemSetAccess after move_pages");
  return true;
}

}  // namespace memscope
