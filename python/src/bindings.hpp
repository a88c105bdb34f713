// Entry points of the extension's topic files: module.cpp calls each bind_* once, in order
// (errors first, so every later binding can raise memscope's exception types).
#pragma once

#include <nanobind/nanobind.h>

namespace memscope::python {

namespace nb = nanobind;

void bind_errors(nb::module_& m);
void bind_units(nb::module_& m);
void bind_allocator(nb::module_& m);
void bind_buffer(nb::module_& m);
void bind_host(nb::module_& m);
void bind_devices(nb::module_& m);
void bind_torch_hooks(nb::module_& m);
void bind_tracker(nb::module_& m);
void bind_device_probe(nb::module_& m);

}  // namespace memscope::python
