#include "memscope/config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "allocator/size_rules.hpp"
#include "common/text.hpp"
#include "memscope/errors.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

using detail::trim;

constexpr std::string_view kFractionRange = "(0, 1]";

bool valid_fraction(double fraction) noexcept {
  return fraction > 0.0 && fraction <= 1.0;
}

std::size_t scale(double fraction, std::size_t capacity) noexcept {
  return static_cast<std::size_t>(fraction * static_cast<double>(capacity));
}

[[noreturn]] void fail(std::string_view key, std::string_view value, std::string_view allowed) {
  throw ConfigError(
      fmt::format("MEMSCOPE_ALLOC_CONF: {}:{} is not allowed: {}", key, value, allowed),
      std::string(key), std::string(value));
}

// Whole, non-negative decimal number with nothing around it.
bool parse_unsigned(std::string_view text, std::uint64_t& out) {
  text = trim(text);
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc{} && end == text.data() + text.size();
}

bool parse_double(std::string_view text, double& out) {
  text = trim(text);
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc{} && end == text.data() + text.size();
}

// Splits "a:1,b:[x:1,y:2],c:3" at top-level commas.
std::vector<std::string_view> split_entries(std::string_view text) {
  std::vector<std::string_view> entries;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || (text[i] == ',' && depth == 0)) {
      entries.push_back(text.substr(start, i - start));
      start = i + 1;
    } else if (text[i] == '[') {
      ++depth;
    } else if (text[i] == ']') {
      --depth;
    }
  }
  return entries;
}

std::size_t parse_max_split(std::string_view key, std::string_view value, bool in_mib) {
  std::size_t bytes = 0;
  if (in_mib) {
    std::uint64_t mib = 0;
    if (!parse_unsigned(value, mib) || mib > (std::uint64_t{1} << 40)) {
      fail(key, value, "a whole number of MiB, at least 20 (e.g. max_split_size_mb:256)");
    }
    bytes = static_cast<std::size_t>(mib) * MiB;
  } else {
    try {
      bytes = parse_size(value, key);
    } catch (const ConfigError&) {
      fail(key, value, "a size of at least 20MiB, e.g. max_split_size:256MiB");
    }
  }
  if (bytes < detail::kLargeBuffer) {
    fail(key, value,
         "at least 20 MiB: smaller blocks are already served whole from 20 MiB segments");
  }
  if (bytes > static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max())) {
    // memory_stats() reports it as a signed 64-bit number (as torch does).
    fail(key, value, "at most 8 EiB (2^63 - 1 bytes); leave it unset for no limit");
  }
  return bytes;
}

std::uint32_t parse_divisions(std::string_view key, std::string_view value) {
  std::uint64_t n = 0;
  if (!parse_unsigned(value, n) || n > 1024 || (n > 1 && !std::has_single_bit(n))) {
    fail(key, value, "a power of two up to 1024 (1 turns rounding off), e.g. 4");
  }
  // 0 and 1 both mean "off": store one spelling of it, so equal settings compare equal and
  // to_string() round-trips (fuzz_config found "roundup_power2_divisions:1" did not).
  return n == 1 ? 0 : static_cast<std::uint32_t>(n);
}

// "4" for every interval, or "[256:1,512:2,>:8]" with interval starts in MiB (powers of two).
void parse_roundup(std::string_view key, std::string_view value, AllocatorConfig& config) {
  const std::string_view v = trim(value);
  if (v.empty() || v.front() != '[') {
    config.roundup_power2_divisions.fill(parse_divisions(key, v));
    return;
  }
  constexpr std::string_view kListForm =
      "a list like [256:1,512:2,1024:4,>:8]: each entry sets the divisions for sizes below its "
      "key in MiB (powers of two, rising) and above the previous key; '>' sets all larger sizes";
  if (v.back() != ']') fail(key, value, kListForm);
  const std::string_view body = v.substr(1, v.size() - 2);
  std::size_t next_interval = 0;  // intervals not yet assigned start here
  for (std::string_view item : split_entries(body)) {
    const std::size_t colon = item.find(':');
    if (colon == std::string_view::npos) fail(key, value, kListForm);
    const std::string_view start = trim(item.substr(0, colon));
    const std::uint32_t divisions = parse_divisions(key, item.substr(colon + 1));
    std::size_t end = AllocatorConfig::kRoundupIntervals;  // one past the last interval set
    if (start != ">") {
      std::uint64_t mib = 0;
      if (!parse_unsigned(start, mib) || mib < 2 || !std::has_single_bit(mib) ||
          mib > (std::uint64_t{1} << 16)) {
        fail(key, value, kListForm);
      }
      // Interval k covers [2^k MiB, 2^(k+1) MiB) (interval 0 everything below 2 MiB), so
      // "below 2^n MiB" ends at interval n - 1.
      end = std::min<std::size_t>(static_cast<std::size_t>(std::countr_zero(mib)),
                                  AllocatorConfig::kRoundupIntervals);
      if (end <= next_interval) fail(key, value, kListForm);
    } else if (next_interval >= AllocatorConfig::kRoundupIntervals) {
      fail(key, value, kListForm);
    }
    for (std::size_t i = next_interval; i < end; ++i)
      config.roundup_power2_divisions[i] = divisions;
    next_interval = end;
  }
}

void parse_memory_limit(std::string_view key, std::string_view value, AllocatorConfig& config) {
  const std::string allowed =
      fmt::format("a fraction of the device's capacity in {} such as 0.8, or a size such as 12GiB",
                  kFractionRange);
  const std::string_view v = trim(value);
  const bool has_unit = !v.empty() && std::isalpha(static_cast<unsigned char>(v.back()));
  if (has_unit) {
    std::size_t bytes = 0;
    try {
      bytes = parse_size(v, key);
    } catch (const ConfigError&) {
      fail(key, value, allowed);
    }
    if (bytes == 0) fail(key, value, allowed);
    config.memory_limit_bytes = bytes;
    config.memory_fraction = 1.0;
    return;
  }
  double fraction = 0;
  if (!parse_double(v, fraction) || !valid_fraction(fraction)) {
    fail(key, value, allowed);
  }
  config.memory_fraction = fraction;
  config.memory_limit_bytes = 0;
}

void parse_gc_threshold(std::string_view key, std::string_view value, AllocatorConfig& config) {
  double t = 0;
  if (!parse_double(value, t) || !(t > 0.0 && t < 1.0)) {
    fail(key, value, "a fraction strictly between 0 and 1, e.g. 0.8");
  }
  config.garbage_collection_threshold = t;
}

void parse_poison_freed(std::string_view key, std::string_view value, AllocatorConfig& config) {
  if (value != "true" && value != "false") fail(key, value, "true or false");
  config.poison_freed = value == "true";
}

void parse_record_history(std::string_view key, std::string_view value, AllocatorConfig& config) {
  std::uint64_t n = 0;
  if (!parse_unsigned(value, n) || n > (std::uint64_t{1} << 32)) {
    fail(key, value, "a whole number of events to keep, up to 2^32 (0 = off), e.g. 100000");
  }
  config.record_history = static_cast<std::size_t>(n);
}

void parse_record_stacks(std::string_view key, std::string_view value, AllocatorConfig& config) {
  if (value != "none" && value != "cpp" && value != "python" && value != "all") {
    fail(key, value, "none, cpp, python or all");
  }
  config.record_cpp_stacks = value == "cpp" || value == "all";
  config.record_python_stacks = value == "python" || value == "all";
}

void parse_expandable(std::string_view key, std::string_view value, AllocatorConfig& config) {
  // PyTorch writes True/False; accept its spelling and ours.
  if (value == "true" || value == "True") {
    config.expandable_segments = true;
  } else if (value == "false" || value == "False") {
    config.expandable_segments = false;
  } else {
    fail(key, value, "true or false (PyTorch's True and False are accepted too)");
  }
}

void parse_page_size(std::string_view key, std::string_view value, AllocatorConfig& config) {
  std::size_t bytes = 0;
  try {
    bytes = parse_size(value, key);
  } catch (const ConfigError&) {
    bytes = 0;
  }
  if (bytes == 0 || !std::has_single_bit(bytes) || bytes > (std::size_t{1} << 30)) {
    fail(key, value,
         "a power of two from the backend's page granularity up to 1GiB, e.g. 2MiB or 32MiB");
  }
  config.expandable_segments_page_size = bytes;
}

void parse_recycling(std::string_view key, std::string_view value, AllocatorConfig& config) {
  using Recycling = AllocatorConfig::PageRecycling;
  constexpr std::array<std::pair<std::string_view, Recycling>, 4> kModes{{
      {"never", Recycling::never},
      {"at_limit", Recycling::at_limit},
      {"above_peak", Recycling::above_peak},
      {"always", Recycling::always},
  }};
  for (const auto& [name, mode] : kModes) {
    if (value == name) {
      config.page_recycling = mode;
      return;
    }
  }
  fail(key, value, "never, at_limit, above_peak or always");
}

void parse_max_split_entry(std::string_view key, std::string_view value, AllocatorConfig& config) {
  config.max_split_size = parse_max_split(key, value, key == "max_split_size_mb");
}

// Every key, in the order messages list them, and what reads its value into the config.
struct KeyRule {
  std::string_view key;
  void (*apply)(std::string_view key, std::string_view value, AllocatorConfig& config);
};
constexpr std::array<KeyRule, 11> kKeyRules{{
    {"max_split_size", parse_max_split_entry},
    {"max_split_size_mb", parse_max_split_entry},
    {"roundup_power2_divisions", parse_roundup},
    {"garbage_collection_threshold", parse_gc_threshold},
    {"memory_limit", parse_memory_limit},
    {"poison_freed", parse_poison_freed},
    {"record_history", parse_record_history},
    {"record_stacks", parse_record_stacks},
    {"expandable_segments", parse_expandable},
    {"expandable_segments_page_size", parse_page_size},
    {"expandable_segments_recycling", parse_recycling},
}};

// PyTorch's keys memscope does not take: refused by name, not as unknown.
constexpr std::array<std::string_view, 4> kTorchOnlyKeys{"pinned_use_cuda_host_register",
                                                         "pinned_num_register_threads", "backend",
                                                         "release_lock_on_cudamalloc"};

std::string known_keys() {
  std::string keys;
  for (const KeyRule& rule : kKeyRules) {
    if (!keys.empty()) keys += ", ";
    keys += rule.key;
  }
  return keys;
}

// One key:value entry read into `config`; ConfigError for a key it does not know.
void apply_entry(std::string_view entry, std::string_view key, std::string_view value,
                 AllocatorConfig& config) {
  for (const KeyRule& rule : kKeyRules) {
    if (key == rule.key) {
      rule.apply(key, value, config);
      return;
    }
  }
  if (std::find(kTorchOnlyKeys.begin(), kTorchOnlyKeys.end(), key) != kTorchOnlyKeys.end()) {
    fail(key, value,
         "this PYTORCH_CUDA_ALLOC_CONF key is not supported by memscope; remove it (keys: " +
             known_keys() + ")");
  }
  throw ConfigError(fmt::format("MEMSCOPE_ALLOC_CONF: unknown key '{}' (in '{}'); known keys: {}",
                                key, entry, known_keys()),
                    std::string(key), std::string(value));
}

// The settings that need another: page size and recycling need expandable segments, stacks need
// a history to record them in.
void check_together(const AllocatorConfig& config, const std::set<std::string, std::less<>>& seen) {
  if (!config.expandable_segments &&
      seen.count("expandable_segments_page_size") + seen.count("expandable_segments_recycling") >
          0) {
    fail(seen.count("expandable_segments_page_size") != 0 ? "expandable_segments_page_size"
                                                          : "expandable_segments_recycling",
         "", "it applies to expandable segments only; add expandable_segments:true");
  }
  if ((config.record_cpp_stacks || config.record_python_stacks) && config.record_history == 0) {
    fail("record_stacks",
         config.record_cpp_stacks && config.record_python_stacks ? "all"
         : config.record_cpp_stacks                              ? "cpp"
                                                                 : "python",
         "stacks are recorded only with record_history:<n> (n > 0); add it, e.g. "
         "record_history:100000");
  }
}

}  // namespace

AllocatorConfig AllocatorConfig::parse(std::string_view text) {
  AllocatorConfig config;
  if (trim(text).empty()) return config;
  std::set<std::string, std::less<>> seen;
  for (std::string_view entry : split_entries(text)) {
    entry = trim(entry);
    if (entry.empty()) {
      throw ConfigError(fmt::format("MEMSCOPE_ALLOC_CONF: '{}' has an empty entry; write "
                                    "key:value pairs separated by single commas",
                                    text),
                        "", std::string(text));
    }
    const std::size_t colon = entry.find(':');
    if (colon == std::string_view::npos) {
      throw ConfigError(fmt::format("MEMSCOPE_ALLOC_CONF: '{}' has no value; write key:value "
                                    "(keys: {})",
                                    entry, known_keys()),
                        std::string(entry), "");
    }
    const std::string_view key = trim(entry.substr(0, colon));
    const std::string_view value = trim(entry.substr(colon + 1));
    const std::string_view canonical = key == "max_split_size_mb" ? "max_split_size" : key;
    if (!seen.insert(std::string(canonical)).second) {
      fail(key, value, "each key may be given once");
    }
    apply_entry(entry, key, value, config);
  }
  check_together(config, seen);
  return config;
}

AllocatorConfig AllocatorConfig::from_env() {
  const char* text = std::getenv("MEMSCOPE_ALLOC_CONF");  // NOLINT(concurrency-mt-unsafe)
  return text == nullptr ? AllocatorConfig{} : parse(text);
}

std::string AllocatorConfig::to_string() const {
  std::vector<std::string> parts;
  if (max_split_size != kUnlimited)
    parts.push_back("max_split_size:" + format_size_exact(max_split_size));
  bool any_division = false;
  for (const std::uint32_t d : roundup_power2_divisions) any_division = any_division || d > 1;
  if (any_division) {
    // Interval i holds sizes below 2^(i+1) MiB; the last one holds everything larger.
    std::string list = "roundup_power2_divisions:[";
    for (std::size_t i = 0; i + 1 < kRoundupIntervals; ++i) {
      list += fmt::format("{}:{},", std::size_t{2} << i, roundup_power2_divisions[i]);
    }
    list += fmt::format(">:{}", roundup_power2_divisions[kRoundupIntervals - 1]);
    parts.push_back(list + "]");
  }
  if (garbage_collection_threshold > 0.0) {
    parts.push_back(fmt::format("garbage_collection_threshold:{}", garbage_collection_threshold));
  }
  if (memory_limit_bytes != 0) {
    parts.push_back("memory_limit:" + format_size_exact(memory_limit_bytes));
  } else if (memory_fraction != 1.0) {
    parts.push_back(fmt::format("memory_limit:{}", memory_fraction));
  }
  if (poison_freed) parts.emplace_back("poison_freed:true");
  if (record_history > 0) parts.push_back(fmt::format("record_history:{}", record_history));
  if (record_cpp_stacks || record_python_stacks) {
    parts.push_back(fmt::format("record_stacks:{}", record_cpp_stacks && record_python_stacks
                                                        ? "all"
                                                    : record_cpp_stacks ? "cpp"
                                                                        : "python"));
  }
  if (expandable_segments) {
    parts.emplace_back("expandable_segments:true");
    if (expandable_segments_page_size != 0) {
      parts.push_back("expandable_segments_page_size:" +
                      format_size_exact(expandable_segments_page_size));
    }
    if (page_recycling != AllocatorConfig{}.page_recycling) {
      parts.push_back(
          fmt::format("expandable_segments_recycling:{}", memscope::to_string(page_recycling)));
    }
  }
  return fmt::format("{}", fmt::join(parts, ","));
}

const char* to_string(AllocatorConfig::PageRecycling policy) noexcept {
  switch (policy) {
    case AllocatorConfig::PageRecycling::never:
      return "never";
    case AllocatorConfig::PageRecycling::at_limit:
      return "at_limit";
    case AllocatorConfig::PageRecycling::above_peak:
      return "above_peak";
    case AllocatorConfig::PageRecycling::always:
      return "always";
  }
  return "never";
}

std::uint32_t AllocatorConfig::divisions_for(std::size_t size) const noexcept {
  // Interval 0 covers everything below 2 MiB; interval k covers [2^k MiB, 2^(k+1) MiB).
  const auto log2 = static_cast<std::size_t>(std::bit_width(size)) - 1;
  const std::size_t index = log2 > 20 ? std::min(log2 - 20, kRoundupIntervals - 1) : 0;
  return roundup_power2_divisions[index];
}

std::size_t AllocatorConfig::memory_limit(std::size_t capacity) const noexcept {
  if (memory_limit_bytes != 0) return memory_limit_bytes;
  return scale(memory_fraction, capacity);  // parse() checked the fraction
}

std::size_t memory_limit_from_fraction(double fraction, std::size_t capacity) {
  if (!valid_fraction(fraction)) {
    const std::string value = fmt::format("{}", fraction);
    throw ConfigError(
        fmt::format("memory fraction {} is not in {}: give the share of the device's capacity "
                    "this allocator may reserve, e.g. 0.8",
                    value, kFractionRange),
        "memory_fraction", value);
  }
  return scale(fraction, capacity);
}

}  // namespace memscope
