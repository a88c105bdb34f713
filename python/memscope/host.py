"""Host memory as Linux reports it (/proc/<pid>/status), and peak windows over RSS.

``rss()`` and ``peak_rss()`` are what ``VmRSS`` and ``VmHWM`` say. ``peak_window()`` opens a
window whose ``read()["peak"]`` is the highest RSS since it opened; windows nest and overlap
freely and none disturbs another (the kernel's own high-water mark, reset through
/proc/self/clear_refs with the cascade rule; a sampling thread where that is not allowed or
``MEMSCOPE_HOST_PEAK_MODE=no-reset`` asks for it, and ``mode()`` says which). Since Linux 6.2
the kernel's RSS counters are per-CPU, so a peak is within ``probe().peak_bound`` bytes of the
truth, not exact; ``memscope.process_peak_rss()`` is the process's lifetime peak, which the
resets do not lower.
"""

from __future__ import annotations

import threading
from typing import Optional

from ._memscope import HostPeakWindow, HostProbe, _read_host_memory

__all__ = ["HostProbe", "HostPeakWindow", "memory", "rss", "peak_rss", "reset_peak",
           "peak_window", "probe", "mode"]

_lock = threading.Lock()
_probe: Optional[HostProbe] = None


def memory(pid: int = 0) -> dict[str, int]:
    """{rss, rss_anon, rss_file, rss_shmem, hwm} in bytes; pid 0 is this process."""
    return _read_host_memory(pid)


def rss(pid: int = 0) -> int:
    """Resident set size (VmRSS) in bytes."""
    return int(_read_host_memory(pid)["rss"])


def peak_rss(pid: int = 0) -> int:
    """The kernel's peak RSS (VmHWM) in bytes: since the process started or the last reset."""
    return int(_read_host_memory(pid)["hwm"])


def probe() -> HostProbe:
    """The shared probe of this process (its windows and mode are shared by every user)."""
    global _probe
    with _lock:
        if _probe is None:
            _probe = HostProbe()
        return _probe


def mode() -> str:
    """How peak windows measure here: "kernel-hwm" or "sampling <interval>"."""
    return probe().mode


def reset_peak() -> None:
    """Resets VmHWM to the current RSS without disturbing any open peak window."""
    probe().reset_peak()


def peak_window() -> HostPeakWindow:
    """An RSS peak window, within the probe's peak_bound (a context manager):
    ``with memscope.host.peak_window() as w: ...; w.read()["peak"]``."""
    return probe().open_window()
