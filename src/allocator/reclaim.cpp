#include "allocator/reclaim.hpp"

namespace memscope::detail {

bool Reclaim::call_free_memory_callbacks() {
  bool freed = false;
  for (const auto& callback : free_memory_callbacks_) freed = callback() || freed;
  return freed;
}

std::size_t Reclaim::garbage_target(std::size_t reserved, std::size_t limit) const noexcept {
  const auto threshold = static_cast<std::size_t>(gc_threshold_ * static_cast<double>(limit));
  return reserved <= threshold ? 0 : reserved - threshold;
}

}  // namespace memscope::detail
