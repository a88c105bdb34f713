// The conformance suites (backends, and their page mapping) on the host and simulated backends
// (the CUDA backend instantiates them in tests/backends/cuda).
#include "backend_conformance.hpp"
#include "memscope/host_backend.hpp"
#include "memscope/simulated_backend.hpp"
#include "page_mapping_conformance.hpp"

namespace memscope::testing {
namespace {

struct HostTraits {
  static std::shared_ptr<Backend> make() { return std::make_shared<HostBackend>(); }
  static std::string unavailable() { return ""; }
};

struct SimulatedTraits {
  static std::shared_ptr<Backend> make() { return std::make_shared<SimulatedBackend>(1 * GiB); }
  static std::string unavailable() { return ""; }
};

INSTANTIATE_TYPED_TEST_SUITE_P(Host, BackendConformance, ::testing::Types<HostTraits>);
INSTANTIATE_TYPED_TEST_SUITE_P(Simulated, BackendConformance, ::testing::Types<SimulatedTraits>);
INSTANTIATE_TYPED_TEST_SUITE_P(Host, PageMappingConformance, ::testing::Types<HostTraits>);
INSTANTIATE_TYPED_TEST_SUITE_P(Simulated, PageMappingConformance,
                               ::testing::Types<SimulatedTraits>);

}  // namespace
}  // namespace memscope::testing
