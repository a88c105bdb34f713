// Which sanitizer this test binary was built with. Tests that compare the process RSS with
// exact figures skip under ThreadSanitizer: it maps shadow memory (several times the size of
// the memory the program touches) that the kernel counts in RSS.
#pragma once

namespace memscope::testing {

#if defined(__SANITIZE_THREAD__)
inline constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif
#else
inline constexpr bool kThreadSanitizer = false;
#endif

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

inline constexpr const char* kRssUnderTsan =
    "ThreadSanitizer's shadow memory is counted in RSS, so exact RSS figures are meaningless "
    "in this build (the default and ASan builds check them)";

}  // namespace memscope::testing
