// MemorySource over a CachingAllocator: allocated_bytes (what torch.cuda.memory_allocated
// reports), with exact peaks from PeakScope, which reset_peak_stats() and other scopes leave
// alone. Kept in its own file so programs that never use it do not link the allocator.
#include <algorithm>

#include "memscope/caching_allocator.hpp"
#include "memscope/memory_source.hpp"
#include "probes/fork_guard.hpp"

namespace memscope {
namespace {

class AllocatorWindow final : public MemorySource::Window {
 public:
  AllocatorWindow(CachingAllocator& allocator, PeakScope scope)
      : allocator_(allocator), scope_(std::move(scope)), begin_(scope_.begin().allocated_bytes) {}

  [[nodiscard]] std::int64_t begin() const noexcept override { return begin_; }

  MemorySource::Reading close() noexcept override {
    MemorySource::Reading r{begin_, begin_};
    try {
      r.current =
          allocator_.stats().allocated_bytes[static_cast<std::size_t>(StatPool::all)].current;
      scope_.close();  // after reading current, so the frozen peak covers that moment too
      r.peak = scope_.peak().allocated_bytes;
    } catch (...) {
      scope_.close();  // stats() failed (out of memory copying them): keep the begin value
    }
    r.peak = std::max({r.peak, r.current, begin_});
    return r;
  }

 private:
  CachingAllocator& allocator_;
  PeakScope scope_;
  std::int64_t begin_;
};

class AllocatorSource final : public MemorySource {
 public:
  AllocatorSource(CachingAllocator& allocator, SourceKind kind)
      : allocator_(allocator), kind_(kind), name_("allocator " + allocator.backend().name()) {}

  [[nodiscard]] std::string name() const override { return name_; }
  [[nodiscard]] SourceKind kind() const noexcept override { return kind_; }
  [[nodiscard]] bool available() const noexcept override { return true; }
  [[nodiscard]] std::string reason() const override { return {}; }
  [[nodiscard]] std::string mode() const override { return "peak-scope"; }
  [[nodiscard]] std::int64_t current() const override {
    return allocator_.stats().allocated_bytes[static_cast<std::size_t>(StatPool::all)].current;
  }
  [[nodiscard]] std::unique_ptr<Window> open_window() override {
    return std::make_unique<AllocatorWindow>(allocator_, allocator_.peak_scope());
  }

 private:
  CachingAllocator& allocator_;
  SourceKind kind_;
  std::string name_;
};

}  // namespace

std::shared_ptr<MemorySource> make_allocator_source(CachingAllocator& allocator, SourceKind kind) {
  // A tracker takes the allocator's lock under its own, so around fork() its lock must be taken
  // first: register the tracker's fork handlers after the allocator's (their prepare handlers
  // run in reverse order of registration).
  detail::register_fork_handlers_last();
  return std::make_shared<AllocatorSource>(allocator, kind);
}

}  // namespace memscope
