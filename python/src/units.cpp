// Byte sizes as people write and read them (units.hpp).
#include <nanobind/stl/string.h>

#include "bindings.hpp"
#include "memscope/units.hpp"

namespace memscope::python {

void bind_units(nb::module_& m) {
  m.def(
      "parse_size", [](const std::string& text) { return parse_size(text); }, nb::arg("text"),
      "\"24GiB\", \"1.5 GB\", \"512\" -> bytes. Raises ConfigError for anything else.");
  m.def(
      "parse_size_with_unit",
      [](const std::string& text, const std::string& what) {
        return parse_size_with_unit(text, what);
      },
      nb::arg("text"), nb::arg("what"),
      "As parse_size, but a bare number is refused (\"24\": bytes or GiB?), as the memscope "
      "command refuses it: ConfigError naming `what` and the spellings that are meant.");
  m.def("format_bytes", &format_bytes, nb::arg("bytes"), "1610612736 -> \"1.50 GiB\".");
  m.def("format_size_exact", &format_size_exact, nb::arg("bytes"), "25769803776 -> \"24GiB\".");
}

}  // namespace memscope::python
