"""A Tracker source over any counter that has a single resettable peak (PyTorch's
max_memory_allocated, for one), made exact for nested and overlapping windows by the cascade
rule of design.md: every window opening first folds the counter's peak so far into the
innermost open window, then resets the counter; a window's peak is the maximum of its own
record, the records of every window opened after it that is still open, and the live counter;
a closing window folds its record into the window below it.

Correct as long as nothing else resets the counter. Thread-safe (one lock per source).
"""

from __future__ import annotations

import threading
from typing import Callable


class CascadeWindow:
    def __init__(self, source: "CascadeSource", begin: int) -> None:
        self._source = source
        self.begin = begin
        self.record = begin  # this window's own running maximum (see the module docstring)
        self.open = True

    def close(self) -> tuple[int, int]:
        """Closes the window; returns (current, peak). Idempotent."""
        return self._source._close(self)


class CascadeSource:
    def __init__(self, *, name: str, kind: str, mode: str, current: Callable[[], int],
                 peak: Callable[[], int], reset_peak: Callable[[], None],
                 available: bool = True, reason: str = "") -> None:
        self.name, self.kind, self.mode = name, kind, mode
        self.available, self.reason = available, reason
        self._current, self._peak, self._reset_peak = current, peak, reset_peak
        self._lock = threading.Lock()
        self._stack: list[CascadeWindow] = []  # open windows, innermost last

    def current(self) -> int:
        return int(self._current())

    def open_window(self) -> CascadeWindow:
        with self._lock:
            if self._stack:  # the counter's peak since the last reset is the innermost's
                top = self._stack[-1]
                top.record = max(top.record, int(self._peak()))
            self._reset_peak()
            w = CascadeWindow(self, self.current())
            self._stack.append(w)
            return w

    def _close(self, w: CascadeWindow) -> tuple[int, int]:
        with self._lock:
            current = self.current()
            if not w.open:
                return current, w.record
            i = self._stack.index(w)
            peak = max(max(x.record for x in self._stack[i:]), int(self._peak()), current)
            if i > 0:
                below = self._stack[i - 1]
                below.record = max(below.record, w.record)
            del self._stack[i]
            w.open, w.record = False, peak
            return current, peak
