#include "allocator/allocation_hooks.hpp"

namespace memscope::detail {

void AllocationHooks::open_window(PeakScope::Windows::Window& window) noexcept {
  statistics_.open_window(window);
  update();
}

void AllocationHooks::close_window(PeakScope::Windows::Window& window) noexcept {
  statistics_.close_window(window);
  update();
}

void AllocationHooks::start_recording(const RecordingOptions& options) {
  recording_.start(options);
  update();
}

void AllocationHooks::stop_recording() noexcept {
  recording_.stop();
  update();
}

void AllocationHooks::after_allocate(const Block& block, std::size_t requested) noexcept {
  if ((bits_ & HotPathGate::kHookWindows) != 0) statistics_.observe_windows();
  if ((bits_ & HotPathGate::kHookRecord) != 0) {
    // Stacks start at our caller (the allocator's allocate()): the recorder's frames are noise.
    recording_.allocated(block, requested,
                         reinterpret_cast<std::uintptr_t>(__builtin_return_address(0)));
  }
}

bool AllocationHooks::record_free(const Block& block) noexcept {
  if (recording_.freed(block)) return false;
  update();  // the last stack forgotten: frees are free again
  return true;
}

bool AllocationHooks::record_completed(const Block& block) noexcept {
  if (recording_.completed(block)) return false;
  update();
  return true;
}

void AllocationHooks::update() noexcept {
  bits_ = (statistics_.has_windows() ? HotPathGate::kHookWindows : 0U) |
          (recording_.wants_frees() ? HotPathGate::kHookRecord : 0U);
}

}  // namespace memscope::detail
