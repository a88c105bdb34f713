"""Where a capture's changes to torch (and transformers) are seen: by the capturing thread
alone, while the capture runs.

The capture replaces attributes of modules every thread shares. ``CAPTURE_LOCK`` lets one
capture run at a time in a process (a second thread waits); ``replaced()`` puts a wrapper in
place that calls the replacement for the capturing thread and the original for every other
thread, and puts the original back when its block ends, however it ends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Optional


class _CaptureLock:
    """The lock captures take, and which thread holds it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.owner: Optional[int] = None  # threading.get_ident() of the capturing thread

    @contextmanager
    def held(self) -> Iterator[None]:
        with self._lock:
            self.owner = threading.get_ident()
            try:
                yield
            finally:
                self.owner = None


CAPTURE_LOCK = _CaptureLock()


def in_capture() -> bool:
    """Whether the calling thread is the one running a capture."""
    owner = CAPTURE_LOCK.owner
    return owner is not None and owner == threading.get_ident()


@contextmanager
def replaced(holder: Any, name: str, replacement: Callable[..., Any]) -> Iterator[Any]:
    """holder.name is `replacement` for the capturing thread and the original for every other
    thread (the wrapper calls it), until the block ends; yields the original."""
    original = getattr(holder, name)

    def scoped(*args: Any, **kwargs: Any) -> Any:
        if in_capture():
            return replacement(*args, **kwargs)
        return original(*args, **kwargs)

    scoped.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(holder, name, scoped)
    try:
        yield original
    finally:
        setattr(holder, name, original)
