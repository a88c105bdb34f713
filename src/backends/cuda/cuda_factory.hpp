// The entry point make_backend() uses for "cuda" and "cuda:<index>" specs.
#pragma once

#include <memory>

#include "memscope/backend.hpp"

namespace memscope::detail {

// A CudaBackend on device `device_index` (as this process numbers visible devices). Throws
// BackendUnavailableError, saying why, when the driver or the device cannot be used.
[[nodiscard]] std::unique_ptr<Backend> make_cuda_backend(int device_index);

}  // namespace memscope::detail
