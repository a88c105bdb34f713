// PyTorch's caching allocator as a memscope_gpu_peers plug-in (bench/gpu_peer.h): raw_alloc and
// raw_delete on the current stream of device 0, peaks from getDeviceStats. Its settings come from
// PYTORCH_CUDA_ALLOC_CONF, read when the allocator is first used (expandable_segments:True for
// the expandable peer, in a process of its own).
//
// Not part of the CMake build: the torch on the GPU machine is not the one here, so
// `scripts/gpu-check --run` compiles it there (g++ -std=c++20 -shared against torch's include and
// lib folders, with the C++ ABI flag torch reports) and skips the peer, with the reason, when that
// fails.
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>

#include <exception>
#include <string>

#include "gpu_peer.h"

namespace {
std::string open_error;
}

extern "C" const char* memscope_peer_open(void) {
  try {
    const auto devices = c10::cuda::device_count();
    if (devices <= 0) return "torch sees no CUDA device";
    // What torch's CUDA hooks do when `import torch` first touches CUDA.
    c10::cuda::CUDACachingAllocator::init(devices);
    c10::cuda::set_device(0);
    return nullptr;
  } catch (const std::exception& e) {
    open_error = e.what();
    return open_error.c_str();
  }
}

extern "C" void* memscope_peer_allocate(size_t bytes) {
  try {
    return c10::cuda::CUDACachingAllocator::raw_alloc(bytes);
  } catch (const std::exception&) {
    return nullptr;
  }
}

extern "C" void memscope_peer_deallocate(void* ptr) {
  c10::cuda::CUDACachingAllocator::raw_delete(ptr);
}

extern "C" long long memscope_peer_peak_reserved(void) {
  // Index 0 is StatType::AGGREGATE, both pools together.
  return static_cast<long long>(
      c10::cuda::CUDACachingAllocator::getDeviceStats(0).reserved_bytes[0].peak);
}

extern "C" void memscope_peer_reset_peak(void) {
  c10::cuda::CUDACachingAllocator::resetPeakStats(0);
}

extern "C" void memscope_peer_empty_cache(void) {
  c10::cuda::CUDACachingAllocator::emptyCache();
}
