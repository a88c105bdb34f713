// The "Key:\tvalue" lines of /proc/<pid>/status, and the numbers in them.
//
// Parsing is allocation-free and noexcept: the host probe parses while holding a lock, inside
// the very allocator it may be measuring. Only self_namespace_pids() reads a file.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace memscope::detail {

// Calls visit(key, value) for each line of `text` that holds a colon, in order: key is what
// comes before the first colon ("VmHWM"), value what follows it without leading blanks
// ("3145728 kB"). visit returns true to stop early.
template <class Visit>
void for_each_status_field(std::string_view text, Visit&& visit) {
  while (!text.empty()) {
    const std::size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
      value.remove_prefix(1);
    }
    if (visit(line.substr(0, colon), value)) return;
  }
}

// Skips blanks, then reads the decimal digits at the front of `text` and consumes them.
// nullopt (and `text` unchanged) when no digit follows the blanks.
[[nodiscard]] std::optional<std::int64_t> take_number(std::string_view& text) noexcept;

// A value such as "3145728 kB" in bytes (the kernel's "kB" are KiB); nullopt without digits.
[[nodiscard]] std::optional<std::int64_t> status_kib_as_bytes(std::string_view value) noexcept;

// The ids of this process in each PID namespace, outermost first, from the NSpid line of
// /proc/self/status ("NSpid:\t4242\t7"). Empty when the line is missing (kernels before 4.1)
// or the file cannot be read.
[[nodiscard]] std::vector<std::uint32_t> self_namespace_pids();

}  // namespace memscope::detail
