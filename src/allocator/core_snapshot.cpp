// AllocatorCore::snapshot(): the block store's layout, with the backend and the settings.
#include "allocator/allocator_core.hpp"

namespace memscope {

Snapshot AllocatorCore::snapshot() const {
  Snapshot snap = store_.layout();
  snap.backend = backend_.name();
  snap.settings = config_.to_string();
  return snap;
}

}  // namespace memscope
