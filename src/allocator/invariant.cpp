#include "allocator/invariant.hpp"

#include <fmt/format.h>

#include "allocator/block.hpp"

namespace memscope::detail {

void broken_invariant(const char* invariant, const std::string& what) {
  throw InternalError(fmt::format("memscope: allocator invariant '{}' broken: {}", invariant, what),
                      invariant);
}

std::string describe(const Block* b) {
  if (b == nullptr) return "(no block)";
  return fmt::format("block {:#x} of {} bytes{}{}{}{} in segment {:#x}", b->address, b->size,
                     b->use.allocated ? ", allocated" : "", b->cached ? ", cached" : "",
                     b->recent ? ", recent" : "", b->unmapped ? ", unmapped" : "",
                     b->segment != nullptr ? b->segment->base : 0);
}

std::string describe(const Segment* s) {
  return fmt::format("segment {:#x} of {} bytes ({} pool, stream {})", s->base, s->size,
                     s->small_pool ? "small" : "large", s->stream);
}

}  // namespace memscope::detail
