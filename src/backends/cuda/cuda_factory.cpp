#include "backends/cuda/cuda_factory.hpp"

#include "memscope/cuda_backend.hpp"

namespace memscope::detail {

std::unique_ptr<Backend> make_cuda_backend(int device_index) {
  return std::make_unique<CudaBackend>(device_index);
}

}  // namespace memscope::detail
