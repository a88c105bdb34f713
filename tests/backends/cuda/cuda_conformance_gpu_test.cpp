// The shared backend conformance suites (tests/support/backend_conformance.hpp, and the page
// mapping one in tests/backends) on the CUDA backend. Every test reports SKIPPED, with the
// reason, where no GPU can be used.
#include "../page_mapping_conformance.hpp"
#include "backend_conformance.hpp"
#include "memscope/cuda_backend.hpp"

namespace memscope::testing {
namespace {

struct CudaTraits {
  static std::shared_ptr<Backend> make() { return std::make_shared<CudaBackend>(0); }
  static std::string unavailable() {
    const Availability cuda = cuda_available();
    return cuda.available ? "" : "no usable CUDA GPU: " + cuda.reason;
  }
};

INSTANTIATE_TYPED_TEST_SUITE_P(Cuda, BackendConformance, ::testing::Types<CudaTraits>);
INSTANTIATE_TYPED_TEST_SUITE_P(Cuda, PageMappingConformance, ::testing::Types<CudaTraits>);

}  // namespace
}  // namespace memscope::testing
