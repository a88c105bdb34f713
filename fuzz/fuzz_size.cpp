// Fuzz target: size strings ("24GiB", with and without a unit required) and backend specs
// ("sim:24GiB"). Either a value or a ConfigError; an exact size always reads back to itself.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "memscope/backend.hpp"
#include "memscope/errors.hpp"
#include "memscope/units.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const std::size_t bytes = memscope::parse_size(text);
    if (memscope::parse_size(memscope::format_size_exact(bytes)) != bytes) std::abort();
  } catch (const memscope::ConfigError&) {
  }
  // With a unit required: the same size, or a ConfigError (a bare number).
  try {
    const std::size_t bytes = memscope::parse_size_with_unit(text);
    if (memscope::parse_size(text) != bytes) std::abort();
  } catch (const memscope::ConfigError&) {
  }
  if (text.starts_with("sim:")) {  // never "cuda" or "host": no driver loads or mmaps here
    try {
      const auto backend = memscope::make_backend(text);
      if (memscope::make_backend(backend->name())->capacity() != backend->capacity()) std::abort();
    } catch (const memscope::ConfigError&) {
    }
  }
  return 0;
}
