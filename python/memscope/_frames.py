"""The Python frames of an allocation as memscope.Trace.from_events takes them: (filename, line,
function), innermost first, PyTorch's and memscope's own frames left out, each distinct stack
interned once (ids count from 1 into the list; 0 is no stack). Used by the estimate's capture
and by memscope.torch.track_growth."""

from __future__ import annotations

import sys
from typing import Any

Frame = tuple[str, int, str]


class StackTable:
    """Interns the caller's stacks into `stacks` (a list the trace is built from)."""

    def __init__(self, stacks: list[list[Frame]], limit: int) -> None:
        self.stacks = stacks
        self.limit = limit  # frames kept per stack
        self.ids: dict[tuple[Frame, ...], int] = {}

    def here(self, skip: int) -> int:
        """The id of the stack `skip` frames above the caller of here()."""
        frames: list[Frame] = []
        f: Any = sys._getframe(skip + 1)
        while f is not None and len(frames) < self.limit:
            name = f.f_code.co_filename
            if "/torch/" not in name and "/memscope/" not in name and "<frozen" not in name:
                frames.append((name, f.f_lineno, f.f_code.co_name))
            f = f.f_back
        key = tuple(frames)
        sid = self.ids.get(key)
        if sid is None:
            self.stacks.append(frames)
            sid = self.ids[key] = len(self.stacks)
        return sid
