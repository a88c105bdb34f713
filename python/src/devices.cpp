// Which devices this process can use: CUDA through the driver loaded at run time. Nothing here
// raises when there is no GPU; the answers say so instead.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include "bindings.hpp"
#include "memscope/cuda_backend.hpp"

namespace memscope::python {

void bind_devices(nb::module_& m) {
  m.def(
      "_cuda_available",
      [] {
        const Availability a = cuda_available();
        return std::pair{a.available, a.reason};
      },
      "(available, reason): reason says why not when CUDA cannot be used.");
  m.def("_cuda_device_count", &cuda_device_count);
  m.def("_cuda_driver_version", &cuda_driver_version);
}

}  // namespace memscope::python
