#include "memscope/snapshot.hpp"

#include <nlohmann/json.hpp>

namespace memscope {

const char* to_string(BlockState state) noexcept {
  switch (state) {
    case BlockState::active_allocated:
      return "active_allocated";
    case BlockState::active_pending_free:
      return "active_pending_free";
    case BlockState::inactive:
      return "inactive";
  }
  return "inactive";
}

MemoryStats Snapshot::totals() const {
  MemoryStats t;
  const auto add = [](StatArray& stat, bool small, std::int64_t amount) {
    stat[static_cast<std::size_t>(StatPool::all)].current += amount;
    stat[static_cast<std::size_t>(small ? StatPool::small : StatPool::large)].current += amount;
  };
  for (const SegmentInfo& segment : segments) {
    const bool small = segment.small_pool;
    add(t.segment, small, 1);
    add(t.reserved_bytes, small, static_cast<std::int64_t>(segment.total_size));
    for (const BlockInfo& block : segment.blocks) {
      const auto size = static_cast<std::int64_t>(block.size);
      if (block.state == BlockState::active_allocated) {
        add(t.allocation, small, 1);
        add(t.allocated_bytes, small, size);
      }
      if (block.state != BlockState::inactive) {
        add(t.active, small, 1);
        add(t.active_bytes, small, size);
        add(t.requested_bytes, small, static_cast<std::int64_t>(block.requested_size));
      } else if (segment.blocks.size() > 1) {
        add(t.inactive_split, small, 1);
        add(t.inactive_split_bytes, small, size);
      }
    }
  }
  return t;
}

std::string Snapshot::to_json(int indent) const {
  nlohmann::json segs = nlohmann::json::array();
  for (const SegmentInfo& s : segments) {
    nlohmann::json blocks = nlohmann::json::array();
    for (const BlockInfo& b : s.blocks) {
      blocks.push_back({{"address", b.address},
                        {"size", b.size},
                        {"requested_size", b.requested_size},
                        {"state", to_string(b.state)}});
    }
    segs.push_back({{"address", s.address},
                    {"total_size", s.total_size},
                    {"allocated_size", s.allocated_size},
                    {"active_size", s.active_size},
                    {"requested_size", s.requested_size},
                    {"stream", s.stream},
                    {"segment_type", s.small_pool ? "small" : "large"},
                    {"is_expandable", s.is_expandable},
                    {"blocks", std::move(blocks)}});
  }
  const nlohmann::json doc{
      {"backend", backend}, {"allocator_settings", settings}, {"segments", std::move(segs)}};
  return doc.dump(indent);
}

}  // namespace memscope
