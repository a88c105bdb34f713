// Stage marks for `memscope run`: while a program runs under it, `memscope run` sets
// MEMSCOPE_MARKS_FD (a pipe's write end, inherited) and MEMSCOPE_MARKS_PATH (the same pipe as
// /proc/<memscope pid>/fd/<n>, for processes whose parent closed inherited descriptors, as
// Python's subprocess and torchrun do). MemoryTracker (C++) and Tracker (Python) write a mark
// when a stage begins and ends; anything else may call write_stage_mark() itself.
//
// A mark is one JSON line, written with a single write(2) of at most PIPE_BUF bytes, so marks
// of many processes never interleave:
//   {"memscope_mark":1,"kind":"begin","stage":"train","pid":42,"t_ns":<CLOCK_MONOTONIC>,
//    "hwm":<process_peak_rss() bytes>}
// and at "end" also "metrics":{"cpu_alloc_delta":...,"cpu_peaked_delta":...,...} (the tracker's
// exact figures, bytes). "hwm" lets memscope run keep a process's true peak although the
// tracker's kernel-hwm windows reset VmHWM.
//
// Thread safety: may be called from any thread; after fork() the child writes its own pid.
// Errors: never throws and never blocks: without the variables, or when the pipe is gone or
// full, the mark is dropped (stage_marks_enabled() says whether marks go anywhere).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace memscope {

// Whether this process writes marks (the variables are set and name a pipe).
[[nodiscard]] bool stage_marks_enabled() noexcept;

// kind: "begin" or "end". metrics: extra integer figures (bytes) for an "end" mark.
void write_stage_mark(std::string_view kind, std::string_view stage,
                      const std::map<std::string, std::int64_t>& metrics = {}) noexcept;

}  // namespace memscope
