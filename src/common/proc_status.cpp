#include "common/proc_status.hpp"

#include <fstream>
#include <iterator>
#include <limits>
#include <string>

namespace memscope::detail {

std::optional<std::int64_t> take_number(std::string_view& text) noexcept {
  std::string_view rest = text;
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
  if (rest.empty() || rest.front() < '0' || rest.front() > '9') return std::nullopt;
  std::int64_t value = 0;
  while (!rest.empty() && rest.front() >= '0' && rest.front() <= '9') {
    const int digit = rest.front() - '0';
    if (value > (std::numeric_limits<std::int64_t>::max() - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
    rest.remove_prefix(1);
  }
  text = rest;
  return value;
}

std::optional<std::int64_t> status_kib_as_bytes(std::string_view value) noexcept {
  const std::optional<std::int64_t> kib = take_number(value);
  if (!kib) return std::nullopt;
  return *kib * 1024;
}

std::vector<std::uint32_t> self_namespace_pids() {
  std::ifstream file("/proc/self/status");
  const std::string text{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
  std::vector<std::uint32_t> pids;
  for_each_status_field(text, [&pids](std::string_view key, std::string_view value) {
    if (key != "NSpid") return false;
    while (const std::optional<std::int64_t> pid = take_number(value)) {
      if (*pid > std::numeric_limits<std::uint32_t>::max()) break;
      pids.push_back(static_cast<std::uint32_t>(*pid));
    }
    return true;
  });
  return pids;
}

}  // namespace memscope::detail
