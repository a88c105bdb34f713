"""Growth across iterations in a running PyTorch job (memscope.torch.track_growth).

The tensors a job makes are recorded as a trace: a ``TorchDispatchMode`` sees every op's outputs
(after autograd), each new storage is an ``alloc`` of its bytes with the Python frames that
made it, and a weak reference to the storage records its ``free_completed`` when the last tensor
using it goes (the technique of memscope.estimate's capture, here on real tensors, CPU or
CUDA). Each ``memscope.torch.step()`` (the Trainer callback's steps, an optimizer-step hook)
marks an iteration boundary; once enough iterations went by, ``Trace.growth()`` says which
sites keep memory from one iteration alive through the next ones. Growth is reported once, as
a ``MemoryGrowthWarning``, or raised as ``MemoryGrowthError`` with ``fail_on_growth=True``.

Categories (the trace's tags): "parameters" (nn.Parameter storages), "autograd graph" (op
outputs that require grad: what a loss kept without ``.detach()`` holds alive) and "tensors".
"""

from __future__ import annotations

import threading
import warnings
import weakref
from typing import TYPE_CHECKING, Any, Optional

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from ._frames import StackTable
from ._memscope import Error, GrowthResult, Trace

if TYPE_CHECKING:
    from typing_extensions import Self

_TAGS = ("parameters", "autograd graph", "tensors")


class MemoryGrowthError(Error, RuntimeError):
    """Raised by step() under track_growth(fail_on_growth=True) once growth is established;
    ``result`` is the GrowthResult."""

    def __init__(self, message: str, result: GrowthResult) -> None:
        super().__init__(message)
        self.result = result


class MemoryGrowthWarning(UserWarning):
    """Warned once per tracker when memory grows across iterations."""


class _Mode(TorchDispatchMode):  # type: ignore[no-untyped-call]
    def __init__(self, tracker: GrowthTracker) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.tracker = tracker

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self.tracker.track(t)
        return out


class GrowthTracker:
    """Records the tensors made between __enter__ and __exit__ and tests growth at each step().
    One per job (use memscope.torch.track_growth)."""

    def __init__(self, min_iterations: int = 3, fail_on_growth: bool = False,
                 frames: int = 8) -> None:
        self.min_iterations = min_iterations
        self.fail_on_growth = fail_on_growth
        self.frames = frames
        self.events: list[tuple[str, int, int, int, int]] = []
        self.stacks: list[list[tuple[str, int, str]]] = []
        self.stack_table = StackTable(self.stacks, limit=frames)
        self.boundaries: list[int] = []
        self.live: dict[int, tuple[int, int, int]] = {}  # storage key -> (addr, size, tag)
        self.refs: dict[int, Any] = {}
        self.next_addr = 0x10000000000
        self.lock = threading.RLock()
        self.warned = False
        self.result: Optional[GrowthResult] = None
        self._mode: Any = None

    # ---- recording ----------------------------------------------------------------------

    def track(self, t: torch.Tensor) -> None:
        try:
            storage = t.untyped_storage()
        except (RuntimeError, NotImplementedError):
            return
        key = storage._cdata
        size = int(storage.nbytes())
        with self.lock:
            if key in self.live or size == 0:
                return
            tag = 1 + (_TAGS.index("parameters") if isinstance(t, torch.nn.Parameter) else
                       _TAGS.index("autograd graph") if t.requires_grad else
                       _TAGS.index("tensors"))
            addr = self.next_addr
            self.next_addr += (size + 511) // 512 * 512 + 512  # distinct, never reused
            self.live[key] = (addr, size, tag)
            self.events.append(("alloc", addr, size, self.stack_table.here(2), tag))

        def gone(_: Any, key: int = key, addr: int = addr) -> None:
            with self.lock:
                entry = self.live.get(key)
                if entry is not None and entry[0] == addr:
                    del self.live[key]
                    self.events.append(("free_completed", addr, entry[1], 0, entry[2]))
                self.refs.pop(addr, None)

        self.refs[addr] = weakref.ref(storage, gone)

    def __enter__(self) -> Self:
        self._mode = _Mode(self)
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._mode is not None:
            self._mode.__exit__(*exc)
            self._mode = None

    # ---- iterations ---------------------------------------------------------------------

    def trace(self) -> Trace:
        with self.lock:
            return Trace.from_events(list(self.events), list(_TAGS), list(self.stacks))

    def step(self) -> Optional[GrowthResult]:
        """Marks an iteration boundary and tests growth; returns the result once enough
        boundaries are known (None before)."""
        with self.lock:
            self.boundaries.append(len(self.events))
            if len(self.boundaries) < self.min_iterations + 2:
                return None
            bounds = list(self.boundaries)
        result = self.trace().growth(boundaries=bounds, min_iterations=self.min_iterations)
        self.result = result
        if result.growing:
            message = ("memscope: memory grows across iterations:\n  " +
                       "\n  ".join(s.text() for s in result.sites))
            if self.fail_on_growth:
                raise MemoryGrowthError(message, result)
            if not self.warned:
                self.warned = True
                warnings.warn(message, MemoryGrowthWarning, stacklevel=3)
        return result
