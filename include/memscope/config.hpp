// AllocatorConfig: the caching allocator's settings, parsed from one string in the style of
// PYTORCH_CUDA_ALLOC_CONF, e.g. MEMSCOPE_ALLOC_CONF="max_split_size:256MiB,memory_limit:0.9".
//
// Keys (the README's configuration reference lists them with examples):
//   max_split_size:<size>              blocks at least this big are never split (>= 20 MiB)
//   max_split_size_mb:<MiB>            the same, in PyTorch's spelling (whole MiB)
//   roundup_power2_divisions:<n>       round requests up to n divisions per power of two;
//                                      n is a power of two (1 = off), or a list per interval:
//                                      [256:1,512:2,1024:4,>:8] (interval starts in MiB)
//   garbage_collection_threshold:<f>   0 < f < 1: when reserved exceeds f x the memory limit,
//                                      release the oldest cached segments first
//   memory_limit:<fraction or size>    0 < fraction <= 1 of capacity, or a size ("12GiB")
//   poison_freed:<true|false>          in AddressSanitizer builds, cached blocks of host memory
//                                      are poisoned until handed out again, so a use after
//                                      free aborts with "use-after-poison"; no effect (and no
//                                      cost) in other builds and on sim and cuda backends
//   record_history:<n>                 record the newest n events from construction on
//                                      (CachingAllocator::start_recording; 0 = off)
//   record_stacks:<none|cpp|python|all> with record_history: the stacks of each allocation
//   expandable_segments:<true|false>   one growable segment per stream and pool: pages of
//                                      memory are mapped into a reserved address range as it
//                                      grows and unmapped when free (PyTorch's True/False too)
//   expandable_segments_page_size:<size> the large pool's page (a power of two, at least the
//                                      backend's granularity; default 2 MiB; small pool: 2 MiB)
//   expandable_segments_recycling:<never|at_limit|above_peak|always>  before mapping new
//                                      pages, move free whole pages from elsewhere: never
//                                      (PyTorch: at the limit, flush everything and retry),
//                                      at_limit (default: what would pass the memory limit),
//                                      above_peak (also what would lift the mapped bytes above
//                                      their high-water mark since the last empty_cache(): the
//                                      stream's own free pages first, then other streams'
//                                      cached ones), always (at every growth, any stream's)
//                                      With expandable segments max_split_size does not limit
//                                      splitting (free pages cannot be stranded; docs/design.md)
// Errors: parse() throws ConfigError naming the key, the value and what is allowed, for
// unknown keys, malformed values, duplicates and empty entries. Pure; thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace memscope {

struct AllocatorConfig {
  static constexpr std::size_t kUnlimited = std::numeric_limits<std::size_t>::max();
  // Power-of-two intervals for roundup_power2_divisions: [0, 2 MiB), [2, 4 MiB) ... [32 GiB, inf).
  static constexpr std::size_t kRoundupIntervals = 16;

  std::size_t max_split_size = kUnlimited;
  std::array<std::uint32_t, kRoundupIntervals> roundup_power2_divisions{};  // 0: off
  double garbage_collection_threshold = 0.0;                                // 0: off
  double memory_fraction = 1.0;  // of the backend's capacity; used when memory_limit_bytes is 0
  std::size_t memory_limit_bytes = 0;  // 0: no absolute limit
  bool poison_freed = false;           // ASan builds, host backend: poison cached blocks
  std::size_t record_history = 0;      // events to keep when recording from the start; 0: off
  bool record_cpp_stacks = false;      // record_stacks:cpp or all
  bool record_python_stacks = false;   // record_stacks:python or all
  // Expandable segments (docs/design.md, "Expandable segments").
  enum class PageRecycling { never, at_limit, above_peak, always };
  bool expandable_segments = false;
  std::size_t expandable_segments_page_size = 0;  // 0: the default (2 MiB, or the granularity)
  PageRecycling page_recycling = PageRecycling::at_limit;

  [[nodiscard]] static AllocatorConfig parse(std::string_view text);
  // Parses MEMSCOPE_ALLOC_CONF, or returns the defaults when it is unset or empty.
  [[nodiscard]] static AllocatorConfig from_env();
  // The canonical string parse() turns back into an equal config.
  [[nodiscard]] std::string to_string() const;
  // Divisions applied to a request of `size` bytes (0 means plain 512-byte rounding).
  [[nodiscard]] std::uint32_t divisions_for(std::size_t size) const noexcept;
  // The most this allocator may reserve on a backend of `capacity` bytes.
  [[nodiscard]] std::size_t memory_limit(std::size_t capacity) const noexcept;

  friend bool operator==(const AllocatorConfig&, const AllocatorConfig&) = default;
};

[[nodiscard]] const char* to_string(AllocatorConfig::PageRecycling policy) noexcept;

// The byte limit that `fraction` of a device of `capacity` bytes stands for: the one rule
// behind memory_limit:<fraction>, set_per_process_memory_fraction() in Python and PyTorch's
// set_memory_fraction hook. Throws ConfigError naming the value unless 0 < fraction <= 1.
[[nodiscard]] std::size_t memory_limit_from_fraction(double fraction, std::size_t capacity);

}  // namespace memscope
