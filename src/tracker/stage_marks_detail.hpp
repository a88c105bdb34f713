// Test hook for stage marks (include/memscope/stage_marks.hpp). The variables are read once
// per process (and checked again after fork); tests that change them need a fresh start.
#pragma once

namespace memscope::detail {

// Forgets what was read from MEMSCOPE_MARKS_FD / MEMSCOPE_MARKS_PATH and closes the descriptor
// memscope opened on the path, so the next mark reads the variables again. Not thread-safe:
// call it only while no other thread writes marks.
void reset_stage_marks() noexcept;

}  // namespace memscope::detail
