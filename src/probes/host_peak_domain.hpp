// HostPeakDomain: the window stack behind HostProbe::Window, in one of two modes.
//
// Kernel mode (kernel_hwm_domain) keeps this invariant: for every open window w, the highest
// RSS since w opened is max(the PeakWindows peak of w, the kernel's VmHWM now). It holds
// because every reset of VmHWM happens when a window opens (or in reset_peak) and first folds
// VmHWM into the innermost window, so the kernel only ever covers time inside every open
// window. One domain per process is shared by all probes on it: two stacks resetting the same
// VmHWM would erase each other's peaks.
//
// Sampling mode (sampling_domain) runs a thread that reads RSS every interval while a window
// is open and feeds it to the innermost window; reads on the caller's side add a sample too.
// Samples are taken under the lock so none lands in a window opened after it was taken.
//
// Both modes survive fork() (probes/fork_guard.hpp): the lock is taken around it, and in the
// child a domain of its own process reopens its /proc/self files and (sampling) restarts its
// thread when next needed. Windows open at the fork stay open in the child: its memory is a copy
// of the parent's, so they report the parent's peak until the fork and the child's after it
// (kernel mode folds the parent's VmHWM into them before forking, since the child's VmHWM
// starts afresh).
//
// Thread safety: every method locks the domain's mutex.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "memscope/host_probe.hpp"

namespace memscope::detail {

class HostPeakDomain {
 public:
  using Windows = PeakWindows<1>;
  using Reading = HostProbe::Window::Reading;

  HostPeakDomain() = default;
  HostPeakDomain(const HostPeakDomain&) = delete;
  HostPeakDomain& operator=(const HostPeakDomain&) = delete;
  virtual ~HostPeakDomain() = default;

  // Opens `w` as the innermost window and returns RSS now. Throws BackendError.
  virtual std::int64_t open(Windows::Window& w) = 0;
  // RSS now and the peak since `w` opened. Throws BackendError.
  virtual Reading read(const Windows::Window& w) = 0;
  // Closes `w`; on a failed read returns what was seen until then.
  virtual Reading close(Windows::Window& w) noexcept = 0;
  // Resets the kernel's VmHWM without losing it for open windows (kernel mode only).
  virtual void reset_peak() = 0;
};

// The shared kernel-mode domain of process `pid` (0: this process), or nullptr with `why_not`
// set when its clear_refs cannot be written.
[[nodiscard]] std::shared_ptr<HostPeakDomain> kernel_hwm_domain(int pid, std::string& why_not);

// A new sampling domain for `pid`. Throws BackendUnavailableError when statm cannot be opened.
[[nodiscard]] std::shared_ptr<HostPeakDomain> sampling_domain(int pid,
                                                              std::chrono::microseconds interval);

}  // namespace memscope::detail
