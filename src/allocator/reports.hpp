// Text the allocator shows people: the memory summary table and the out-of-memory message.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "memscope/config.hpp"
#include "memscope/errors.hpp"
#include "memscope/stats.hpp"

namespace memscope::detail {

// The table behind CachingAllocator::memory_summary(), in the layout of
// torch.cuda.memory_summary(): one row per statistic and pool, current/peak/allocated/freed.
[[nodiscard]] std::string format_memory_summary(const MemoryStats& stats, std::string_view backend);

// The message of an OutOfMemoryError: what was asked, what the device has, where the memory
// is, and which setting could help.
[[nodiscard]] std::string format_oom_message(const OutOfMemoryError::Figures& figures,
                                             std::string_view backend,
                                             const AllocatorConfig& config);

}  // namespace memscope::detail
