// CudaBackend's private state, shared by its two source files: cuda_backend.cpp (segments and
// events) and cuda_pages.cpp (page mapping for expandable segments).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/cuda/driver_loader.hpp"
#include "memscope/cuda_backend.hpp"

namespace memscope {

namespace detail {
// memscope's stream and event ids are the driver's handles (cuda_backend.hpp).
inline cu::CUstream to_stream(StreamId stream) noexcept {
  return reinterpret_cast<cu::CUstream>(stream);  // NOLINT(performance-no-int-to-ptr)
}
inline cu::CUevent to_event(EventId event) noexcept {
  return reinterpret_cast<cu::CUevent>(event);  // NOLINT(performance-no-int-to-ptr)
}
}  // namespace detail

struct CudaBackend::State {
  std::shared_ptr<const detail::CudaDriver> driver;
  int index = 0;
  cu::CUdevice device = 0;
  cu::CUcontext context = nullptr;
  std::size_t capacity = 0;
  std::string device_name;
  mutable std::mutex events_mutex;
  std::vector<cu::CUevent> free_events;

  // Page mapping. granularity is 0 (and page_mapping_note says why) where the driver or device
  // cannot map pages; both are set once, in the constructor.
  std::size_t granularity = 0;
  std::string page_mapping_note;
  struct MappedPage {
    cu::CUmemGenericAllocationHandle handle = 0;  // one physical allocation per page
    std::size_t bytes = 0;
  };
  mutable std::mutex pages_mutex;
  std::map<std::uintptr_t, MappedPage> pages;    // by mapped address
  std::map<std::uintptr_t, std::size_t> ranges;  // reserved ranges: base -> bytes
};

namespace detail {
// Prints a failed driver call of a release path (which cannot throw) to stderr, once per
// process; CUDA_ERROR_DEINITIALIZED (the driver torn down at exit) is not reported.
void report_release_failure(const CudaDriver& driver, cu::CUresult result, const char* what);
// Sets state.granularity and state.page_mapping_note (cuda_pages.cpp). Never throws for a
// driver or device that cannot map pages: page mapping is then off, and the note says why.
void probe_page_mapping(CudaBackend::State& state);
// Unmaps and releases every page and range left (the backend's destructor). Never throws.
void release_all_pages(CudaBackend::State& state) noexcept;
}  // namespace detail

}  // namespace memscope
