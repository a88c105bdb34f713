// memscope._memscope: the compiled half of the memscope package. The public API is the package
// (python/memscope/__init__.py); this module holds the bindings it is built from.
#include "bindings.hpp"

NB_MODULE(_memscope, m) {
  using namespace memscope::python;
  m.doc() = "memscope's C++ core (use the memscope package, not this module)";
  m.attr("__version__") = MEMSCOPE_VERSION;  // the VERSION file, passed by CMake
  bind_errors(m);
  bind_units(m);
  bind_allocator(m);
  bind_buffer(m);
  bind_host(m);
  bind_devices(m);
  bind_torch_hooks(m);
  bind_tracker(m);
  bind_cascade(m);
  bind_device_probe(m);
  bind_trace(m);
  bind_recording(m);
  bind_rank_table(m);
  bind_report(m);
}
