#include "common/env_switch.hpp"

#include <cstdlib>
#include <string>

#include "common/text.hpp"
#include "memscope/errors.hpp"

namespace memscope::detail {

bool read_env_switch(const EnvSwitch& s) {
  const char* raw = std::getenv(s.name);  // NOLINT(concurrency-mt-unsafe)
  if (raw == nullptr) return false;
  const std::string_view value(raw);
  for (const std::string_view word : s.off) {
    if (iequals_lower(value, word)) return false;
  }
  for (const std::string_view word : s.on) {
    if (iequals_lower(value, word)) return true;
  }
  throw ConfigError("memscope: " + std::string(s.name) + "='" + std::string(raw) + "' is not " +
                        std::string(s.is_not) + "; use " + std::string(s.use),
                    s.name, raw);
}

}  // namespace memscope::detail
