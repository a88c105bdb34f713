// TODO(issue 11): being written.
#include "bindings.hpp"

namespace memscope::python {

void bind_recording(nb::module_& /*m*/) {}

}  // namespace memscope::python
