#include "allocator/segment_source.hpp"

namespace memscope::detail {

Block* SegmentSource::place(StreamPools& /*pools*/, bool /*small*/, std::size_t /*rounded*/) {
  return nullptr;
}

bool SegmentSource::release_some(StreamPools& /*pools*/, std::size_t /*rounded*/) {
  return false;
}

}  // namespace memscope::detail
