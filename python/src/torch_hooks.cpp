// C entry points for torch.cuda.memory.CUDAPluggableAllocator, exported from this extension
// module itself: memscope.torch passes the module's own path to it, and dlopen() of an already
// loaded library returns the same handle, so PyTorch and Python share one set of allocators.
//
// Signatures are the ones PyTorch calls (cudaStream_t is a pointer, ABI-identical to void*):
//   void* memscope_torch_malloc(ssize_t size, int device, cudaStream_t stream)
//   void  memscope_torch_free(void* ptr, ssize_t size, int device, cudaStream_t stream)
//   void  memscope_torch_record_stream(void* ptr, cudaStream_t stream)
//   void  memscope_torch_empty_cache()            (PyTorch's "reset" hook: empty_cache())
//   void  memscope_torch_set_memory_fraction(double fraction, int device)
// They run on PyTorch's threads without the GIL and never touch Python. malloc and free take
// no lock of their own (the allocator's is the only one): see hook_allocator().
//
// Errors: malloc lets OutOfMemoryError (a std::runtime_error) propagate, and PyTorch turns it
// into a RuntimeError naming the figures; returning nullptr instead would hand PyTorch a null
// tensor it does not check for. free never throws: a pointer that is not ours is ignored (and
// counted in num_invalid_frees), as happens when frees arrive after a redirect was undone.
#include <sys/types.h>

#include <atomic>
#include <string>

#include <nanobind/stl/string.h>

#include "bindings.hpp"
#include "registry.hpp"

#define MEMSCOPE_EXPORT extern "C" __attribute__((visibility("default")))

namespace memscope::python {
namespace {

// Tests and benchmarks without a GPU point the hooks at another backend (e.g. "sim:8GiB");
// null: CUDA. Lock-free for the hooks: one acquire load per call. The pointee is a default
// allocator, which the registry never destroys, so a hook that loaded the previous value while
// a redirect changed it still uses a live allocator.
std::atomic<CachingAllocator*> redirect{nullptr};

CachingAllocator* hook_allocator(int device) {
  if (CachingAllocator* a = redirect.load(std::memory_order_acquire)) return a;
  return default_cuda_allocator(device);  // lock-free too once the device's allocator exists
}

}  // namespace

void bind_torch_hooks(nb::module_& m) {
  m.def(
      "_redirect_torch_hooks",
      [](const std::string& spec) {
        redirect.store(spec.empty() ? nullptr : default_allocator(spec).get(),
                       std::memory_order_release);
      },
      nb::arg("spec"), "Testing aid: the torch hooks use this backend's default allocator.");
}

}  // namespace memscope::python

MEMSCOPE_EXPORT void* memscope_torch_malloc(ssize_t size, int device, void* stream) {
  if (size <= 0) return nullptr;
  return memscope::python::hook_allocator(device)->allocate(
      static_cast<std::size_t>(size), reinterpret_cast<memscope::StreamId>(stream));
}

MEMSCOPE_EXPORT void memscope_torch_free(void* ptr, ssize_t /*size*/, int device,
                                         void* /*stream*/) noexcept {
  if (ptr == nullptr) return;
  try {
    (void)memscope::python::hook_allocator(device)->try_deallocate(ptr);
  } catch (...) {
    // Only reachable if the allocator for `device` could not be created, in which case this
    // pointer cannot be ours.
  }
}

MEMSCOPE_EXPORT void memscope_torch_record_stream(void* ptr, void* stream) {
  if (ptr == nullptr) return;
  // PyTorch passes no device: the allocator that owns the pointer is the one to tell.
  for (const std::string& spec : memscope::python::default_allocator_specs()) {
    auto allocator = memscope::python::default_allocator(spec);
    if (allocator->lookup(ptr).size != 0) {
      allocator->record_stream(ptr, reinterpret_cast<memscope::StreamId>(stream));
      return;
    }
  }
}

MEMSCOPE_EXPORT void memscope_torch_empty_cache() {
  if (memscope::CachingAllocator* redirected =
          memscope::python::redirect.load(std::memory_order_acquire)) {
    (void)redirected->empty_cache();
    return;
  }
  for (const std::string& spec : memscope::python::default_allocator_specs()) {
    auto allocator = memscope::python::default_allocator(spec);
    if (allocator->backend().memory_kind() == memscope::MemoryKind::device)
      (void)allocator->empty_cache();
  }
}

MEMSCOPE_EXPORT void memscope_torch_set_memory_fraction(double fraction, int device) {
  memscope::CachingAllocator* allocator = memscope::python::hook_allocator(device);
  // PyTorch lets 0 through; ConfigError (naming the fraction) propagates as malloc's errors do.
  allocator->set_memory_limit(
      memscope::memory_limit_from_fraction(fraction, allocator->backend().capacity()));
}
