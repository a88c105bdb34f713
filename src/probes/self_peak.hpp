// The process-lifetime peak RSS of this process that memscope has seen: every value of the
// kernel's high-water mark read just before memscope reset it, and every VmHWM and VmRSS read.
// The peak domains note into it (kernel_hwm_domain.cpp) and process_peak_rss() reads it
// (host_probe.cpp); on its own so that neither of those depends on the other for it.
// Lock-free; a forked child starts from zero (its ru_maxrss does).
#pragma once

#include <cstdint>

namespace memscope::detail {

void note_self_peak(std::int64_t bytes) noexcept;
// The highest noted so far; the first call also installs the fork hook that zeroes it in a child.
[[nodiscard]] std::int64_t self_peak_seen();

}  // namespace memscope::detail
