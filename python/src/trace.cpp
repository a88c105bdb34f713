// TODO(issue 11): being written.
#include "bindings.hpp"

namespace memscope::python {

void bind_trace(nb::module_& /*m*/) {}

}  // namespace memscope::python
