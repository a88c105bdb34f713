// Stage metrics as values, and the three ways out: metrics_format (numbers to readable
// text), log_metrics (an aligned table) and save_metrics (JSON files), after the Hugging Face
// Trainer functions of the same names so existing habits and dashboards carry over.
//
// What a key holds is told by its name (metric_unit()): memory keys hold bytes
// ("train_mem_cpu_alloc_delta", any key containing "_mem_", ending in "_delta" or "_bytes"), keys
// containing "_runtime" hold seconds, "total_flos" (and keys ending in "_flos") hold FLOPs.
// Formatting picks one unit per kind for the whole table (KiB/MiB/GiB for bytes, GFLOP/TFLOP
// for FLOPs) so the numbers line up; FormatOptions::trainer_compat prints what the Trainer
// prints instead ("512MB" meaning MiB, "3GF" meaning 2^30 FLOPs).
//
// save_metrics writes {split}_results.json and merges into all_results.json; each file is
// written to a temporary file in the same folder, flushed to disk and renamed over the old
// one, so a crash leaves either the old file or the new one, never a part. The merge keeps
// every key already in all_results.json that the new metrics do not replace, and holds a lock
// on the folder so two processes merging at once lose nothing.
//
// Thread safety: pure functions, except that the file functions touch the file system.
// Errors: save_metrics throws UsageError for a bad split name, Error when all_results.json is
// not a JSON object (it is left untouched), BackendError when a file cannot be written;
// load_metrics throws Error for a missing or malformed file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace memscope {

using MetricValue = std::variant<std::int64_t, double, std::string>;
using Metrics = std::map<std::string, MetricValue, std::less<>>;
// Text about the metrics, kept out of them so they stay numeric (dashboards plot numbers):
// label -> note, e.g. "gpu" -> "cuda unavailable: no CUDA driver" (MemoryTracker::notes()).
using MetricNotes = std::map<std::string, std::string, std::less<>>;

// What a metric holds, told by its key: the one rule, which the metrics table, `memscope diff`
// and the rank table all follow. The first that applies, in this order:
enum class MetricUnit : std::uint8_t {
  memory,  // bytes, by the Trainer's own rule: the key contains "_mem_" (train_mem_cpu_alloc_delta)
  seconds,  // the key contains "_runtime" (train_runtime)
  flops,    // "total_flos" and keys ending in "_flos"
  bytes,    // bytes by name, for keys from any source: containing "_memscope_" (memscope.hf's
            // names when the Trainer tracks memory too) or ending in "_delta" or "_bytes"
            // (cpu_peaked_delta of a run's stage marks, reserved_bytes)
  number,   // anything else
};
[[nodiscard]] MetricUnit metric_unit(std::string_view key) noexcept;
// Whether a key holds bytes: its unit is memory or bytes.
[[nodiscard]] bool is_memory_key(std::string_view key) noexcept;

struct FormatOptions {
  // "MB" (really MiB) and "GF" (really 2^30 FLOPs), as the Trainer prints them: "MB" for
  // MetricUnit::memory keys only, the Trainer's own rule; other byte keys as plain numbers.
  bool trainer_compat = false;
};

// Every value as text, keyed as the input.
[[nodiscard]] std::map<std::string, std::string> metrics_format(const Metrics& metrics,
                                                                const FormatOptions& options = {});

// "***** {split} metrics *****" and one "  key = value" line per metric, keys and values
// aligned, one block per stage (the text before a key's first '_'; before_init_* goes with
// init), blocks in the order: keys without a stage, init, then by name. Numbers are aligned to
// the widest number; a text value follows its "= " unpadded, so one long text does not widen
// the column. Then `notes` (MemoryTracker::notes()), if any, once: "  notes:" and one line each.
[[nodiscard]] std::string format_metrics_table(std::string_view split, const Metrics& metrics,
                                               const FormatOptions& options = {},
                                               const MetricNotes& notes = {});
void log_metrics(std::string_view split, const Metrics& metrics, std::FILE* out = stdout,
                 const FormatOptions& options = {}, const MetricNotes& notes = {});

void save_metrics(std::string_view split, const Metrics& metrics,
                  const std::filesystem::path& output_dir, bool combined = true);
// Reads the file once (read_whole_file(): a pipe or FIFO reads too), then parse_metrics().
[[nodiscard]] Metrics load_metrics(const std::filesystem::path& file);
// Saved metrics from their JSON text: one object whose values are numbers, strings or booleans
// (true and false as 1 and 0; a repeated key keeps its last value), Python's NaN, Infinity and
// -Infinity accepted. std::nullopt for JSON of any other shape and for text that is not JSON,
// so a caller can tell kinds of files apart. Built without a JSON tree: millions of keys cost
// the metrics only.
[[nodiscard]] std::optional<Metrics> parse_metrics(std::string_view text);

}  // namespace memscope
