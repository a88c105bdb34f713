// Traces: reading a PyTorch memory snapshot, turning it into a replayable sequence of
// allocations and frees, and replaying that sequence through a memscope CachingAllocator.
//
// A snapshot (torch.cuda.memory._dump_snapshot) is a pickle of plain data: the allocator's
// segments and blocks at the moment of the dump, and, when history was recorded, one list of
// events per device (alloc, free_requested, free_completed, segment_alloc...). The trace usually
// starts after memory was already live, so build_replay_plan() first rebuilds that starting live
// set: (a) every free_completed whose address was not allocated earlier in the trace, (b) every
// active_allocated block whose address is never allocated in the trace. The plan allocates that
// set, then replays alloc and free_completed in order (the corpus README, MEMSCOPE_TRACES).
//
// replay() runs a plan through an allocator on a simulated device (addresses only, no memory
// behind them) and reports the peaks, where they are and what was live there, the
// fragmentation figure (peak reserved / peak live requested) and the cost per event, so
// allocator settings can be compared on real workloads (replay.hpp).
//
// Thread safety: the functions are pure apart from the allocator replay() is given (which is
// itself thread-safe). Results are plain values.
// Errors: TraceFormatError for a snapshot that is not a pickle of plain data, lacks a field,
// holds a field of the wrong type, or whose events contradict each other (an address allocated
// twice, freed twice); the message names the file and the field, e.g.
// "snap.pickle: device_traces[0][17].size: expected int, found str".
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "memscope/backend.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/config.hpp"
#include "memscope/pickle.hpp"
#include "memscope/replay.hpp"
#include "memscope/snapshot.hpp"
#include "memscope/stats.hpp"
#include "memscope/trace_events.hpp"
#include "memscope/units.hpp"

namespace memscope {

// ---- Reading ------------------------------------------------------------------------------
// The data model (TorchSnapshot, TraceEvent, frames) is in trace_events.hpp.

// Converts an unpickled snapshot; `source` names it in error messages.
[[nodiscard]] TorchSnapshot read_torch_snapshot(const PickleValue& root,
                                                std::string_view source = "<snapshot>");
// The same from the pickle's bytes, without building the PickleValue (about twice as fast): the
// same checks, limits and errors as read_torch_snapshot(read_pickle(data, source, limits),
// source), except that the memory of the skipped PickleValue is not charged to max_bytes.
[[nodiscard]] TorchSnapshot read_torch_snapshot_pickle(std::string_view data,
                                                       std::string_view source = "<snapshot>",
                                                       const PickleLimits& limits = {});
// read_torch_snapshot_pickle() on the file's bytes.
[[nodiscard]] TorchSnapshot read_torch_snapshot_file(const std::filesystem::path& path);
// A snapshot written as JSON (by PyTorch's newer tools or write_torch_snapshot()).
[[nodiscard]] TorchSnapshot read_torch_snapshot_json(std::string_view json,
                                                     std::string_view source = "<snapshot>");
// RMM's allocation log (rmm::mr::logging_resource_adaptor): a CSV with the header
// Thread,Time,Action,Pointer,Size,Stream and the actions allocate, allocate failure and free.
// The result has one device trace (alloc / free_completed / oom events) and no segments.
[[nodiscard]] TorchSnapshot read_rmm_log(std::string_view csv, std::string_view source = "<log>");
// Any of the above, told apart by content, never by name: a pickle (first byte 0x80, or a
// protocol-0 opcode), JSON (first non-space character '{' or '['), an RMM log (the header).
// An unreadable file or an unknown format is a TraceFormatError naming the accepted formats.
[[nodiscard]] TorchSnapshot read_trace_file(const std::filesystem::path& path);
// read_trace_file() on bytes already read (read_whole_file()); `source` names them in errors.
[[nodiscard]] TorchSnapshot read_trace(std::string_view data, std::string_view source);
// The whole content of an input file, read once (so a pipe, `<(zcat t.pickle.gz)` or
// /dev/stdin works), what every reader above uses. A regular file is read to its size; a /proc
// file, a pipe, a FIFO or a terminal to its end, up to half the machine's memory (at most
// 64 GiB); a FIFO that no writer opens within 5 s is refused rather than waited on forever.
// Errors: TraceFormatError "cannot read PATH: ..." saying what the path is (no such file, a
// folder, a character device, permission denied, too much from a stream).
[[nodiscard]] std::string read_whole_file(const std::filesystem::path& path);
enum class TraceFormat { unknown, pickle, json, rmm_log };
// The format read_trace_file() would choose for these bytes.
[[nodiscard]] TraceFormat detect_trace_format(std::string_view data) noexcept;

// ---- Writing ------------------------------------------------------------------------------

enum class SnapshotFormat { pickle, json };
// The snapshot as PyTorch writes it (torch.cuda.memory._dump_snapshot): a pickle of the given
// protocol (2 to 4; PyTorch's viewer cannot read 5), or JSON.
[[nodiscard]] std::string torch_snapshot_pickle(const TorchSnapshot& snapshot, int protocol = 4);
[[nodiscard]] std::string torch_snapshot_json(const TorchSnapshot& snapshot);
// Writes atomically (a temporary file beside `path`, then rename): an interrupted write leaves
// no partial file. The format follows the extension (.json: JSON; anything else: pickle).
void write_torch_snapshot(const TorchSnapshot& snapshot, const std::filesystem::path& path);

// The replay sequence, replaying, explaining, comparing settings and fitting: replay.hpp.

}  // namespace memscope
