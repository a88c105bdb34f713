// MemorySource: one memory counter a MemoryTracker watches (a process's RSS, an allocator's
// allocated bytes, later a device's used memory), with peak windows over it.
//
// A source says what it is (name, cpu or gpu), whether it can measure here (available(), and
// reason() when not), how it measures peaks (mode(), printed in every report), and opens
// windows: a window remembers the value when it opened and, when closed, gives the value then
// and the highest value in between. Windows of one source may be nested, overlapping and
// closed in any order, and each must be exact (or state how far off it may be: peak_bound());
// that is the whole contract.
//
// Implementations here: make_host_source (HostProbe: VmHWM or sampling, within the kernel's
// RSS-counter slack),
// make_allocator_source (a CachingAllocator's allocated_bytes through PeakScope, the number
// torch.cuda.memory_allocated reports) and make_unavailable_source (a placeholder that says
// why, e.g. "no CUDA driver"). New sources (NVML, torch) implement the two classes below.
//
// Thread safety: implementations must allow every method from any thread. Ownership: the
// tracker shares sources through shared_ptr; a window keeps whatever it needs alive except
// where a factory says otherwise. Errors: open_window() and current() may throw memscope
// errors; Window::close() and destructors never throw.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "memscope/host_probe.hpp"

namespace memscope {

class CachingAllocator;

enum class SourceKind { cpu, gpu };

class MemorySource {
 public:
  struct Reading {
    std::int64_t current = 0;  // bytes when the window closed
    std::int64_t peak = 0;     // highest bytes while it was open; >= current and begin
  };

  class Window {
   public:
    Window() = default;
    Window(const Window&) = delete;
    Window& operator=(const Window&) = delete;
    virtual ~Window() = default;  // closes the window if still open

    // The value when the window opened; stays valid after close().
    [[nodiscard]] virtual std::int64_t begin() const noexcept = 0;
    // Ends the window. Called once; on failure returns what was seen until then.
    virtual Reading close() noexcept = 0;
  };

  MemorySource() = default;
  MemorySource(const MemorySource&) = delete;
  MemorySource& operator=(const MemorySource&) = delete;
  virtual ~MemorySource() = default;

  [[nodiscard]] virtual std::string name() const = 0;  // "host rss (pid 42)", ...
  [[nodiscard]] virtual SourceKind kind() const noexcept = 0;
  [[nodiscard]] virtual bool available() const noexcept = 0;
  [[nodiscard]] virtual std::string reason() const = 0;    // why not available; else empty
  [[nodiscard]] virtual std::string mode() const = 0;      // "kernel-hwm", "sampling 1ms", ...
  [[nodiscard]] virtual std::int64_t current() const = 0;  // bytes now
  // How far a reading may be from the exact value, in bytes (the host's RSS counters are
  // approximate: HostProbe::peak_bound()); 0 for an exact source. Reported in
  // MemoryTracker::notes() (and as {stage}_mem_{label}_peak_bound with report_modes).
  [[nodiscard]] virtual std::int64_t peak_bound() const { return 0; }
  // Opens a window now. Only called when available().
  [[nodiscard]] virtual std::unique_ptr<Window> open_window() = 0;
};

// The RSS of a process through a new HostProbe; unavailable (with the reason) where /proc
// cannot be read.
[[nodiscard]] std::shared_ptr<MemorySource> make_host_source(const HostProbeOptions& options = {});
// The RSS through an existing probe (shared, so its windows and mode are shared too).
[[nodiscard]] std::shared_ptr<MemorySource> make_host_source(std::shared_ptr<HostProbe> probe);
// allocated_bytes of `allocator`, exact through PeakScope. The allocator must outlive the
// source and every window opened on it. `kind` is gpu for a device allocator, cpu otherwise.
[[nodiscard]] std::shared_ptr<MemorySource> make_allocator_source(
    CachingAllocator& allocator, SourceKind kind = SourceKind::gpu);
// A source that measures nothing and says why.
[[nodiscard]] std::shared_ptr<MemorySource> make_unavailable_source(SourceKind kind,
                                                                    std::string name,
                                                                    std::string reason);

}  // namespace memscope
