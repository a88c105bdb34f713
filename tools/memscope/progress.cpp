#include "progress.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

namespace memscope::cli {
namespace {

constexpr auto kRedrawEvery = std::chrono::milliseconds(100);

bool progress_wanted() {
  const char* off = std::getenv("MEMSCOPE_NO_PROGRESS");  // NOLINT(concurrency-mt-unsafe)
  if (off != nullptr && *off != '\0') return false;
  return isatty(STDERR_FILENO) == 1;
}

// "3.1 M", "41 k", "512": short counts for one line.
std::string short_count(std::uint64_t n) {
  char buffer[32];
  if (n >= 10'000'000'000ULL) {
    std::snprintf(buffer, sizeof buffer, "%.1f G", static_cast<double>(n) / 1e9);
  } else if (n >= 10'000'000ULL) {
    std::snprintf(buffer, sizeof buffer, "%.1f M", static_cast<double>(n) / 1e6);
  } else if (n >= 10'000ULL) {
    std::snprintf(buffer, sizeof buffer, "%.1f k", static_cast<double>(n) / 1e3);
  } else {
    std::snprintf(buffer, sizeof buffer, "%llu", static_cast<unsigned long long>(n));
  }
  return buffer;
}

}  // namespace

Progress::Progress(std::string what) : what_(std::move(what)), enabled_(progress_wanted()) {}

Progress::~Progress() noexcept {
  finish();
}

void Progress::update(std::uint64_t done, std::uint64_t total, const char* unit) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (shown_ && now - last_ < kRedrawEvery) return;
  last_ = now;
  shown_ = true;
  if (total > 0) {
    const double percent = 100.0 * static_cast<double>(done) / static_cast<double>(total);
    std::fprintf(stderr, "\r\033[K%s %3.0f%% (%s of %s%s%s)", what_.c_str(), percent,
                 short_count(done).c_str(), short_count(total).c_str(), *unit ? " " : "", unit);
  } else {
    std::fprintf(stderr, "\r\033[K%s (%s%s%s)", what_.c_str(), short_count(done).c_str(),
                 *unit ? " " : "", unit);
  }
  std::fflush(stderr);
}

void Progress::phase(std::string what) {
  what_ = std::move(what);
  if (!enabled_) return;
  shown_ = true;
  last_ = std::chrono::steady_clock::now();
  std::fprintf(stderr, "\r\033[K%s", what_.c_str());
  std::fflush(stderr);
}

void Progress::finish() noexcept {
  if (!enabled_ || !shown_) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  shown_ = false;
}

}  // namespace memscope::cli
