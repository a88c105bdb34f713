// One reader for memscope's two-way environment switches (MEMSCOPE_SKIP_MEMORY_METRICS,
// MEMSCOPE_HOST_PEAK_MODE): unset or one of `off` is false, one of `on` is true (ASCII case
// ignored), anything else is a ConfigError naming the variable, the value and what is allowed.
// Reads the environment: call it where getenv is safe (not concurrently with setenv).
#pragma once

#include <initializer_list>
#include <string_view>

namespace memscope::detail {

struct EnvSwitch {
  const char* name;                             // "MEMSCOPE_SKIP_MEMORY_METRICS"
  std::initializer_list<std::string_view> off;  // lower case; "" matches an empty value
  std::initializer_list<std::string_view> on;   // lower case
  std::string_view is_not;                      // "a switch": the error says "... is not a switch"
  std::string_view use;                         // the allowed values, as the error states them
};

[[nodiscard]] bool read_env_switch(const EnvSwitch& s);

}  // namespace memscope::detail
