// Fuzz target: MEMSCOPE_ALLOC_CONF parsing. Any input either parses, and then survives a round
// trip through to_string(), or raises ConfigError; nothing else may escape and nothing may crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "memscope/config.hpp"
#include "memscope/errors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const memscope::AllocatorConfig config = memscope::AllocatorConfig::parse(text);
    if (memscope::AllocatorConfig::parse(config.to_string()) != config) std::abort();
  } catch (const memscope::ConfigError&) {
    // Rejected with a typed error: the expected outcome for most inputs.
  }
  return 0;
}
