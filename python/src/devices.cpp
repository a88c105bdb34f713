// Which devices this process can use: CUDA through the driver loaded at run time. Nothing here
// raises when there is no GPU; the answers say so instead. And BackendSpec, the one
// parser of device specs ("host", "sim:24GiB", "cuda:1").
#include <fmt/format.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <string>

#include "bindings.hpp"
#include "memscope/backend.hpp"
#include "memscope/cuda_backend.hpp"

namespace memscope::python {
namespace {

const char* type_name(BackendSpec::Type type) noexcept {
  switch (type) {
    case BackendSpec::Type::host:
      return "host";
    case BackendSpec::Type::simulated:
      return "sim";
    case BackendSpec::Type::cuda:
      return "cuda";
  }
  return "host";
}

}  // namespace

void bind_devices(nb::module_& m) {
  nb::class_<BackendSpec>(m, "BackendSpec",
                          "A parsed backend spec: \"host\", \"sim:<size>\", \"cuda\" or "
                          "\"cuda:<index>\". str() is the canonical spelling, the one "
                          "Allocator.backend shows.")
      .def(
          "__init__",
          [](BackendSpec* self, const std::string& spec) {
            new (self) BackendSpec(BackendSpec::parse(spec));
          },
          nb::arg("spec"), "Parses `spec`; raises ConfigError naming it when it is not one.")
      .def_prop_ro(
          "type", [](const BackendSpec& s) { return type_name(s.type); },
          "\"host\", \"sim\" or \"cuda\".")
      .def_prop_ro(
          "capacity",
          [](const BackendSpec& s) -> std::optional<std::size_t> {
            if (s.type != BackendSpec::Type::simulated) return std::nullopt;
            return s.capacity;
          },
          "Bytes of a simulated device; None for the others.")
      .def_prop_ro(
          "index",
          [](const BackendSpec& s) -> std::optional<int> {
            if (s.type != BackendSpec::Type::cuda) return std::nullopt;
            return s.device_index;
          },
          "The CUDA device index; None for the others.")
      .def("__str__", &BackendSpec::to_string)
      .def("__repr__",
           [](const BackendSpec& s) { return fmt::format("BackendSpec('{}')", s.to_string()); })
      .def("__eq__",
           [](const BackendSpec& a, nb::handle other) {
             return nb::isinstance<BackendSpec>(other) && nb::cast<const BackendSpec&>(other) == a;
           })
      .def("__hash__",
           [](const BackendSpec& s) { return std::hash<std::string>{}(s.to_string()); });
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
