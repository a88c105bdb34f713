// Temporary: replaced by src/backends/cuda when the CUDA backend lands.
#include "backends/cuda/cuda_factory.hpp"
#include "memscope/errors.hpp"

namespace memscope::detail {
std::unique_ptr<Backend> make_cuda_backend(int /*device_index*/) {
  throw BackendUnavailableError("cuda backend: not built into this version of memscope");
}
}  // namespace memscope::detail
