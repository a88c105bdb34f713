// Progress of long work on a terminal: "memscope replay: replaying 41% (3.1 M of 7.6 M events)"
// rewritten in place on stderr at most ten times a second, and cleared when done. Silent when
// stderr is not a terminal (piped, redirected, CI) or MEMSCOPE_NO_PROGRESS is set, so logs stay
// clean. Thread safety: one thread uses a Progress at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace memscope::cli {

class Progress {
 public:
  // `what` starts the line ("memscope replay: reading trace.pickle").
  explicit Progress(std::string what);
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  ~Progress() noexcept;  // clears the line

  // `done` of `total` units ("events", "bytes"); total 0: unknown, shows only `done`.
  void update(std::uint64_t done, std::uint64_t total, const char* unit = "");
  // A new phase on the same line ("memscope replay: searching the smallest device").
  void phase(std::string what);
  void finish() noexcept;  // clears the line now

  [[nodiscard]] bool enabled() const noexcept { return enabled_; }

 private:
  std::string what_;
  bool enabled_ = false;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace memscope::cli
