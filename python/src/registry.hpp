// State shared by every part of the extension: the default allocator of each backend (also used
// by the PyTorch hooks, which run without the GIL) and the set of addresses owned by Buffers.
//
// Thread safety: every function may be called from any thread, with or without the GIL.
// Lifetime: the registry is never destroyed, so frees that arrive during interpreter or process
// shutdown (PyTorch frees tensors late) still find their allocator.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "memscope/backend.hpp"
#include "memscope/caching_allocator.hpp"

namespace memscope::python {

// The default allocator of `spec` ("host", "sim:24GiB", "cuda:0"), created on first use with
// MEMSCOPE_ALLOC_CONF. Throws ConfigError / BackendUnavailableError as make_backend() does.
[[nodiscard]] std::shared_ptr<CachingAllocator> default_allocator(const std::string& spec);
// The default allocator of CUDA device `device`, cached per index for the PyTorch hooks.
[[nodiscard]] CachingAllocator* default_cuda_allocator(int device);
// Canonical specs of the default allocators created so far.
[[nodiscard]] std::vector<std::string> default_allocator_specs();

// Addresses owned by live Buffer objects: a raw free() of one is refused, so the Buffer never
// frees memory that has since been handed to someone else.
void claim_buffer_address(const CachingAllocator* allocator, std::uintptr_t address);
void release_buffer_address(const CachingAllocator* allocator, std::uintptr_t address) noexcept;
[[nodiscard]] bool is_buffer_address(const CachingAllocator* allocator, std::uintptr_t address);

// "host", "device" or "simulated".
[[nodiscard]] const char* kind_name(MemoryKind kind) noexcept;

}  // namespace memscope::python
