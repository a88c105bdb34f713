// Makes a context current on this thread for one scope and restores the caller's afterwards.
//
// Why push/pop instead of setting the context once: the allocator runs on the caller's threads,
// which may have another context current (a second device, a user-created context). Leaving ours
// current would silently redirect their later driver and runtime calls. When ours is already
// current (the usual case with PyTorch on the same device) the guard costs one cuCtxGetCurrent.
#pragma once

#include <new>

#include "backends/cuda/driver_loader.hpp"

namespace memscope::detail {

class ScopedContext {
 public:
  // Throws BackendError when the context cannot be made current.
  ScopedContext(const CudaDriver& driver, cu::CUcontext context) : driver_(driver) {
    cu::CUcontext current = nullptr;
    check_cuda(driver_, driver_.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
    if (current != context) {
      check_cuda(driver_, driver_.cuCtxPushCurrent(context), "cuCtxPushCurrent");
      pushed_ = true;
    }
  }
  // Never throws: for release paths. ok() says whether the context is current.
  ScopedContext(const CudaDriver& driver, cu::CUcontext context, std::nothrow_t) noexcept
      : driver_(driver) {
    cu::CUcontext current = nullptr;
    if (driver_.cuCtxGetCurrent(&current) != cu::CUDA_SUCCESS) {
      ok_ = false;
      return;
    }
    if (current != context) {
      pushed_ = driver_.cuCtxPushCurrent(context) == cu::CUDA_SUCCESS;
      ok_ = pushed_;
    }
  }
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;
  ~ScopedContext() {
    if (pushed_) {
      cu::CUcontext popped = nullptr;
      (void)driver_.cuCtxPopCurrent(&popped);
    }
  }

  [[nodiscard]] bool ok() const noexcept { return ok_; }

 private:
  const CudaDriver& driver_;
  bool pushed_ = false;
  bool ok_ = true;
};

}  // namespace memscope::detail
