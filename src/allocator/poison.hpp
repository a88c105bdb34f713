// poison_freed: cached blocks of host memory are poisoned for AddressSanitizer and unpoisoned
// when handed out or released. No-ops in builds without ASan; the allocator core and its
// segment sources call it with whether the setting applies (the setting is on and the
// backend's memory is host memory the CPU can address).
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__SANITIZE_ADDRESS__)
#define MEMSCOPE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MEMSCOPE_ASAN 1
#endif
#endif
#ifdef MEMSCOPE_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace memscope::detail {

#ifdef MEMSCOPE_ASAN
inline constexpr bool kAsan = true;
#else
inline constexpr bool kAsan = false;
#endif

// Poisons (`on`) or unpoisons [address, address + size) when `enabled`.
inline void poison_region(bool enabled, std::uintptr_t address, std::size_t size,
                          bool on) noexcept {
#ifdef MEMSCOPE_ASAN
  if (!enabled) return;
  void* const p = reinterpret_cast<void*>(address);  // NOLINT(performance-no-int-to-ptr)
  if (on) {
    ASAN_POISON_MEMORY_REGION(p, size);
  } else {
    ASAN_UNPOISON_MEMORY_REGION(p, size);
  }
#else
  (void)enabled;
  (void)address;
  (void)size;
  (void)on;
#endif
}

}  // namespace memscope::detail
