// Stage marks for `memscope run`: the lines processes write to MEMSCOPE_MARKS_FD (format in
// include/memscope/stage_marks.hpp), read back as RunMark values, and paired into RunStage
// values once the run is over.
//
// Thread safety: a MarkReader is used by one thread; the functions are pure. Ownership: a
// MarkReader reads the descriptor it is given and never closes it.
// Errors: none thrown for bad input: a line that is not a mark is counted in malformed() and
// dropped, since any program in the tree may write to the descriptor it inherited.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memscope/watched_run.hpp"

namespace memscope {

// One mark line (without its newline) as a RunMark; t is seconds since `start_ns`
// (CLOCK_MONOTONIC, nanoseconds). nullopt when the line is not a well-formed mark, or one
// timed before `start_ns`.
[[nodiscard]] std::optional<RunMark> parse_mark_line(std::string_view line, std::int64_t start_ns);

// Reads marks from the read end of the marks pipe (non-blocking), keeping a partial line for the
// next read.
class MarkReader {
 public:
  MarkReader(int fd, std::int64_t start_ns) : fd_(fd), start_ns_(start_ns) {}
  // Reads what the pipe holds now and appends the complete marks to `out`.
  void drain(std::vector<RunMark>& out);
  [[nodiscard]] std::size_t malformed() const noexcept { return malformed_; }

 private:
  void take_line(std::string_view line, std::vector<RunMark>& out);

  int fd_;
  std::int64_t start_ns_;
  std::string partial_;
  std::size_t malformed_ = 0;
};

// Pairs each "begin" with the next "end" of the same process and stage name (nested stages of
// one name pair innermost first); a begin without an end has end = -1. The tree's sampled RSS
// and GPU peaks during each stage come from t / tree_rss / tree_gpu (the samples inside
// [begin, end]; -1 when no sample fell inside). Sorted by begin.
[[nodiscard]] std::vector<RunStage> pair_stages(const std::vector<RunMark>& marks,
                                                const std::vector<double>& t,
                                                const std::vector<std::int64_t>& tree_rss,
                                                const std::vector<std::int64_t>& tree_gpu,
                                                double run_end);

}  // namespace memscope
