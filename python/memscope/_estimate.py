"""Would a training step fit on a GPU, and at what batch size: answered without the GPU.

``memscope.estimate(workload, batch=8, capacity="24GiB")`` runs ``workload(batch)`` (which builds
the model and optimizer on "cuda" and returns one training step) on PyTorch fake tensors, records
what the CUDA caching allocator would be asked for (memscope._capture), and replays that trace
through memscope's allocator rules on a simulated device of ``capacity``. ``max_batch`` searches
the largest batch that replays without an out-of-memory error. ``memscope estimate``
(``python3 -m memscope._estimate_command``) is the command line. docs/estimate.md says what is
modelled and what is not. torch is imported on first use, not by ``import memscope``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from . import _devices
from ._devices import Card
from ._memscope import (
    ReplayResult,
    Report,
    Trace,
    UsageError,
    _config_without_limit,
    format_bytes,
    parse_size_with_unit,
)

Workload = Callable[[int], Callable[[], Any]]
Size = Union[int, str]

# A device this large never refuses: the replay that finds what the step needs. A step that
# asks for more (a batch of 2**40) is refused: no GPU has it, and the replay would stop short.
_UNLIMITED = 1 << 50


class StepTooLargeError(UsageError, ValueError):
    """The step asks for more memory than any device has (over 1 PiB): the batch is too
    large for an estimate to mean anything."""


def _size(value: Size, what: str) -> int:
    """A capacity as bytes (int > 0) or text with its unit ("24GiB"; "24" is refused as the
    memscope command refuses it: parse_size_with_unit)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"{what}: expected bytes (int) or a size such as \"24GiB\", got "
                        f"{type(value).__name__}")
    n = parse_size_with_unit(value, what) if isinstance(value, str) else value
    if n <= 0:
        raise ValueError(f"{what}: must be positive, got {value!r}")
    if n >= _UNLIMITED:
        raise ValueError(f"{what}: {value!r} is over 1 PiB, more than any GPU has")
    return n


def _count(value: Any, what: str, low: int = 1) -> int:
    """An int argument of at least `low` (bool refused: steps=True is no count)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what}: expected an int, got {type(value).__name__} {value!r}")
    if value < low:
        raise ValueError(f"{what}: must be at least {low}, got {value}")
    return value


def _config(value: Any) -> str:
    """The allocator settings, checked before any capture: ConfigError names a bad one."""
    if not isinstance(value, str):
        raise TypeError(f"config: expected allocator settings as a str such as "
                        f"\"expandable_segments:true\" (\"\" for the defaults), got "
                        f"{type(value).__name__}")
    _config_without_limit(value)
    return value


def _workspace_for(device: str) -> int:
    """cuBLAS's workspace for the device named (memscope._devices: PyTorch's default for its
    compute capability)."""
    return _devices.cublas_workspace(_devices.capability(device))


def _device(value: Any) -> str:
    """A device name the table knows (UnknownDeviceError, listing them, otherwise)."""
    if not isinstance(value, str):
        raise TypeError(f"device: expected a GPU name such as \"h100\", \"a100\" or "
                        f"\"cuda:0\", got {type(value).__name__}")
    _devices.capability(value)
    return value


def _is_generic(device: str) -> bool:
    """"cuda" or "cuda:N": no GPU named, a Hopper-class one meant."""
    d = device.strip().lower()
    return d == "cuda" or (d.startswith("cuda:") and d[5:].isdigit())


def _capacity(value: Optional[Size], device: str, what: str = "capacity") -> tuple[int,
                                                                                Optional[Card]]:
    """(bytes, card): a card's name ("h100-80gb") is the whole card, its usable memory, of
    which the allocator gets what the context and handles leave; bytes or a size with its unit
    are the allocator's share. None: the card `device` names, else 24 GiB."""
    if value is None:
        named = _devices.card(device)
        return (named.usable.bytes, named) if named is not None else (_size("24GiB", what), None)
    if isinstance(value, str):
        named = _devices.card(value)
        if named is not None:
            if not _is_generic(device) and _devices.capability(device) != named.capability:
                raise ValueError(f"{what} {value!r} and device {device!r} name different GPUs; "
                                 f"give one of them, or the same GPU")
            return named.usable.bytes, named
        if value.strip()[:1].isalpha():
            raise _devices.unknown_card(value, what)
    return _size(value, what), None


@dataclass(frozen=True)
class Arguments:
    """What estimate and max_batch resolved from their arguments."""

    capacity: int  # bytes: the card's usable memory, or the allocator's share given in bytes
    card: Optional[Card]  # the card `capacity` (or `device`) named
    device: str  # the GPU for the kernels: the card's name when only the card was named
    workspace: int  # cuBLAS's workspace

    def share(self, c: Any) -> int:
        """What the allocator may use: the capacity in bytes, or what the card's context and
        the handles capture `c` used leave of it."""
        if self.card is None:
            return self.capacity
        return self.capacity - self.card.outside(len(c.cublas_threads), len(c.cudnn_threads))


def _arguments(workload: Any, capacity: Optional[Size], steps: Any, device: Any, config: Any,
               workspace_bytes: Any) -> Arguments:
    """Every argument estimate and max_batch share, checked before any capture."""
    if not callable(workload):
        raise TypeError(f"workload: expected a function workload(batch) returning the step, "
                        f"or a transformers.Trainer, got {type(workload).__name__}")
    _count(steps, "steps")
    _device(device)
    cap, card = _capacity(capacity, device)
    if card is not None and _is_generic(device):
        device = card.name
    _config(config)
    ws = (_workspace_for(device) if workspace_bytes is None
          else _count(workspace_bytes, "workspace_bytes", 0))
    return Arguments(cap, card, device, ws)


def _gpu(device: str) -> Any:
    """How the GPU named `device` dispatches attention (memscope._attention)."""
    from . import _attention

    return _attention.gpu_for(device)


@dataclass(frozen=True)
class CardUse:
    """The whole card, when the capacity named one: its usable memory, what the process holds
    outside the caching allocator (the CUDA context, a cuBLAS handle per thread that multiplied
    matrices, a cuDNN handle per thread that ran cuDNN), the allocator's peak reserved, and what
    is left (negative: short by that much). ``sources`` says where each figure comes from."""

    card: str
    total: int
    context: int
    cublas_handles: int  # bytes, all handles
    cudnn_handles: int
    reserved: int
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def outside(self) -> int:
        return self.context + self.cublas_handles + self.cudnn_handles

    @property
    def left(self) -> int:
        return self.total - self.outside - self.reserved


def _card_use(card: Card, c: Any, reserved: int) -> CardUse:
    nb, nd = len(c.cublas_threads), len(c.cudnn_threads)

    def said(f: _devices.Figure) -> str:
        return f.source

    return CardUse(card.name, card.usable.bytes, card.context.bytes,
                   nb * card.cublas_handle.bytes, nd * card.cudnn_handle.bytes, reserved,
                   {"usable memory": said(card.usable), "CUDA context": said(card.context),
                    f"cuBLAS handles ({nb})": said(card.cublas_handle),
                    f"cuDNN handles ({nd})": said(card.cudnn_handle)})


@dataclass
class Estimate:
    """One training step's estimate. Byte figures are what PyTorch's allocator would report on
    the GPU: ``peak_allocated`` is ``torch.cuda.max_memory_allocated()`` over the last step,
    ``peak_reserved`` ``torch.cuda.max_memory_reserved()`` over it (the peaks reset after the
    warm-up steps: what the cache holds then, or more), with the settings ``config``.
    ``capacity`` is what the allocator may use: the bytes given, or, when the capacity named a
    card, what its context and handles leave of it (``card`` has the whole card)."""

    batch: int
    steps: int
    capacity: int
    config: str
    device: str
    peak_allocated: int
    peak_reserved: int
    fits: bool
    by_category: dict[str, int]  # live at the last step's peak; adds up to peak_allocated
    top_modules: list[tuple[str, int]]  # live at that peak, by the module that allocated it
    trace: Trace
    replay: ReplayResult  # on `capacity`
    workspace_bytes: int
    capture_seconds: float
    replay_seconds: float
    ops: int
    not_modeled: tuple[str, ...] = field(default_factory=tuple)
    attention: dict[str, int] = field(default_factory=dict)  # SDPA calls by CUDA backend
    # The replay without a limit, for the report: (reserved, allocated, requested) after each
    # event, each step's [first, end) events, and the event at the last step's peak.
    series: list[tuple[int, int, int]] = field(default_factory=list, repr=False)
    step_bounds: list[tuple[int, int]] = field(default_factory=list, repr=False)
    peak_event: int = 0
    card: Optional[CardUse] = None  # the whole card, when the capacity named one

    def report(self) -> Report:
        """The estimate as memscope's report model: to_text(), to_json() (the memscope
        envelope), to_html() (the categories and modules beside memory over the replay)."""
        from ._estimate_report import estimate_report

        return estimate_report(self)

    def explain(self) -> str:
        """The report as aligned text: the peaks, the fit, what is live at the peak and what
        the estimate does not model."""
        return self.report().to_text()

    def __str__(self) -> str:
        return self.explain()

    def to_dict(self) -> dict[str, Any]:
        """The figures as plain values (for JSON)."""
        return {
            "batch": self.batch, "steps": self.steps, "capacity": self.capacity,
            "config": self.config, "device": self.device,
            "peak_allocated": self.peak_allocated, "peak_reserved": self.peak_reserved,
            "fits": self.fits, "by_category": dict(self.by_category),
            "top_modules": [list(m) for m in self.top_modules],
            "workspace_bytes": self.workspace_bytes, "ops": self.ops,
            "capture_seconds": self.capture_seconds, "replay_seconds": self.replay_seconds,
            "not_modeled": list(self.not_modeled), "attention": dict(self.attention),
            "card": None if self.card is None else {
                "name": self.card.card, "total": self.card.total, "context": self.card.context,
                "cublas_handles": self.card.cublas_handles,
                "cudnn_handles": self.card.cudnn_handles, "reserved": self.card.reserved,
                "left": self.card.left, "sources": dict(self.card.sources)},
        }


def _require_torch() -> None:
    if importlib.util.find_spec("torch") is None:
        raise ImportError("memscope.estimate needs PyTorch: pip install torch")


def _as_workload(workload: Any, batch: Optional[int]) -> tuple[Workload, int]:
    """(the workload, the batch): a transformers.Trainer becomes the workload of its training
    step (memscope._trainer), its per-device batch size the default batch; 8 otherwise."""
    from . import _trainer

    if _trainer.is_trainer(workload):
        work, per_device = _trainer.trainer_workload(workload)
        return work, per_device if batch is None else batch
    return workload, 8 if batch is None else batch


def estimate(workload: Union[Workload, Any], batch: Optional[int] = None, steps: int = 3,
             device: str = "cuda:0", capacity: Optional[Size] = None, config: str = "",
             workspace_bytes: Optional[int] = None) -> Estimate:
    """Captures `steps` runs of the step ``workload(batch)`` returns, on fake tensors (nothing
    is allocated, no GPU is needed), and replays it on a simulated device of `capacity` with the
    allocator settings `config` (PYTORCH_CUDA_ALLOC_CONF syntax). `capacity` in bytes (or
    "24GiB") is what the allocator may use; a card's name ("h100-80gb", memscope._devices) is the
    whole card: the allocator gets what the CUDA context and the cuBLAS/cuDNN handles leave, and
    ``Estimate.card`` shows them; None: the card `device` names, else 24 GiB. `workload` may
    also be a transformers.Trainer: its training step, with its arguments and one batch of its data
    collator; `batch` defaults to its per-device batch size (else 8). `device` names the GPU the
    estimate is for (it chooses cuBLAS's workspace size and the attention kernels; "cuda:0"
    means a Hopper-class GPU); `workspace_bytes` overrides that size. Every argument is checked
    before the capture (TypeError or ValueError naming it, memscope.ConfigError for `config`,
    memscope.UnknownDeviceError for a device or card name the table does not know, listing
    those it knows). Raises memscope.CaptureError naming the op when the step cannot run
    without data (an op with no fake kernel, ``.item()``, data-dependent shapes),
    StepTooLargeError when it needs more than any GPU has."""
    workload, batch = _as_workload(workload, batch)
    _count(batch, "batch")
    args = _arguments(workload, capacity, steps, device, config, workspace_bytes)
    _require_torch()
    from . import _capture

    t0 = time.perf_counter()
    c = _capture.capture(workload, batch, steps, args.workspace, gpu=_gpu(args.device),
                         capacity=args.capacity)
    return _evaluate(c, batch, steps, args, config, time.perf_counter() - t0)


def _evaluate(c: Any, batch: int, steps: int, args: Arguments, config: str,
              capture_seconds: float) -> Estimate:
    """The estimate of a capture: its trace replayed, the last step's peak, what was live."""
    from . import _capture

    t1 = time.perf_counter()
    trace, starts = _trace(c, batch)
    # What the step needs: no limit, whatever `config` says (its memory_limit is for the fit).
    free = trace.replay(capacity=_UNLIMITED, config=_config_without_limit(config), series=True,
                        top_sites=0)
    assert isinstance(free, ReplayResult)
    if free.oom:
        raise StepTooLargeError(f"memscope.estimate: at batch {batch} the step asks for more "
                                f"than {format_bytes(_UNLIMITED)}, more than any GPU has: give "
                                "a smaller batch")
    cap, device = args.share(c), args.device
    on_cap = trace.replay(capacity=max(1, cap), config=config)
    assert isinstance(on_cap, ReplayResult)
    t2 = time.perf_counter()
    series = free.series
    first = starts[-1]
    window = range(max(0, first - 1), len(series))
    peak_op = max(window, key=lambda i: series[i][1]) if len(window) else 0
    peak_allocated = series[peak_op][1] if series else 0
    # max_memory_reserved() after a reset following the warm-up steps: the reserved bytes at
    # the reset, or more during the last step.
    peak_reserved = max((series[i][0] for i in window), default=free.peak_reserved)
    by_category, modules = _live_at(c, trace_events(c), peak_op, peak_allocated)
    return Estimate(
        batch=batch, steps=steps, capacity=cap, config=config, device=device,
        peak_allocated=peak_allocated, peak_reserved=peak_reserved,
        fits=cap > 0 and not on_cap.oom,
        by_category=by_category, top_modules=modules, trace=trace, replay=on_cap,
        workspace_bytes=c.workspace_bytes, capture_seconds=capture_seconds,
        replay_seconds=t2 - t1, ops=c.ops, not_modeled=_capture.NOT_MODELED,
        attention=dict(c.attention), series=series, peak_event=peak_op,
        step_bounds=[(b, starts[i + 1] if i + 1 < len(starts) else len(series))
                     for i, b in enumerate(starts)],
        card=None if args.card is None else _card_use(args.card, c, peak_reserved))


def trace_events(c: Any) -> list[tuple[str, int, int, int, int]]:
    """The capture's events without those of host tensors (recorded, then found on the host)."""
    host = {a.addr for a in c.allocations.values() if a.category == "host"}
    return [e for e in c.events if e[1] not in host]


def _trace(c: Any, batch: int) -> tuple[Trace, list[int]]:
    host = {a.addr for a in c.allocations.values() if a.category == "host"}
    kept = 0
    index = []  # events kept before each original index
    for e in c.events:
        index.append(kept)
        kept += e[1] not in host
    index.append(kept)
    starts = [index[s] for s in c.step_starts]
    events = trace_events(c)
    if not events:
        raise UsageError("memscope.estimate: the step allocated no GPU memory (does it use "
                         "\"cuda\" tensors?)")
    largest = max(e[2] for e in events)
    if largest >= _UNLIMITED:
        raise StepTooLargeError(f"memscope.estimate: at batch {batch} one allocation is "
                                f"{format_bytes(min(largest, (1 << 63) - 1))}, more than any "
                                "GPU has: give a smaller batch")
    return Trace.from_events(events, c.tags, c.stacks), starts


def _live_at(c: Any, events: Sequence[tuple[str, int, int, int, int]], op: int,
             allocated: int) -> tuple[dict[str, int], list[tuple[str, int]]]:
    """What was live after event `op`: requested bytes by category (plus the allocator's
    rounding, so they add up to `allocated`) and by module."""
    from ._capture import CATEGORIES

    live: dict[int, int] = {}
    for action, addr, size, _, _ in events[: op + 1]:
        if action == "alloc":
            live[addr] = size
        else:
            live.pop(addr, None)
    cats = {name: 0 for name in CATEGORIES if name != "host"}
    mods: dict[str, int] = {}
    for addr, size in live.items():
        a = c.allocations[addr]
        cats[a.category] += size
        if a.category == "workspaces":
            where = f"({a.op}s)"
        elif a.phase == "forward" and a.module:
            where = a.module
        else:
            where = f"({a.phase or 'setup'})"
        mods[where] = mods.get(where, 0) + size
    cats["allocator rounding"] = max(0, allocated - sum(cats.values()))
    top = sorted(mods.items(), key=lambda kv: -kv[1])[:8]
    return cats, top


@dataclass
class BatchSearch:
    """max_batch's answer and how it was found."""

    batch: int  # the largest batch that fits; 0 when batch 1 does not
    capacity: int
    tried: dict[int, bool]  # batch -> fits, for every batch captured
    predicted: dict[int, bool]  # batch -> fits, for every batch replayed from the affine model
    affine: bool  # the trace's sizes were affine in the batch (checked on three captures)
    estimates: dict[int, Estimate]
    seconds: float
    card: Optional[str] = None  # the card the capacity named (capacity: the allocator's share)

    def explain(self) -> str:
        def fmt(d: dict[int, bool]) -> str:
            return ", ".join(f"{b}:{'fits' if ok else 'OOM'}" for b, ok in sorted(d.items()))

        n = len(self.tried)
        how = (f"{n} capture{'s' if n != 1 else ''} ({fmt(self.tried)})")
        if self.affine:
            how += (f", {len(self.predicted)} replays of the trace scaled in the batch "
                    f"({fmt(self.predicted)})")
        on = format_bytes(self.capacity)
        if self.card:
            on = f"{self.card} (the allocator's share: {on})"
        return (f"largest batch on {on}: {self.batch} "
                f"({how}; {self.seconds:.1f} s)")

    def __int__(self) -> int:
        return self.batch


Event = tuple[str, int, int, int, int]


def _affine_model(caps: dict[int, Any]) -> Optional[Callable[[int], list[Event]]]:
    """When the captures at three batches have the same events, allocation for allocation, and
    every size is a + k * batch with integers a, k >= 0: a function giving the trace's events
    at any batch. None otherwise."""
    (b0, c0), (b1, c1), (b2, c2) = sorted(caps.items())
    seqs = [trace_events(c) for c in (c0, c1, c2)]

    def shape(events: list[Event]) -> list[tuple[str, int]]:
        ordinal: dict[int, int] = {}
        out = []
        for action, addr, _, _, _ in events:
            if action == "alloc":
                ordinal[addr] = len(ordinal)
            out.append((action, ordinal.get(addr, -1)))
        return out

    if not (len(seqs[0]) == len(seqs[1]) == len(seqs[2])):
        return None
    if not (shape(seqs[0]) == shape(seqs[1]) == shape(seqs[2])):
        return None
    base: list[tuple[int, int]] = []
    for e0, e1, e2 in zip(*seqs, strict=True):
        k, rem = divmod(e1[2] - e0[2], b1 - b0)
        a = e0[2] - k * b0
        if rem or k < 0 or a + k * b2 != e2[2] or e0[3:] != e2[3:]:
            return None
        base.append((a, k))
    template = seqs[0]

    def events_at(batch: int) -> list[Event]:
        return [(e[0], e[1], a + k * batch, e[3], e[4])
                for e, (a, k) in zip(template, base, strict=True)]

    return events_at


def _largest_fitting(fits: Callable[[int], bool], lo: int, hi: Optional[int],
                     limit: int) -> int:
    """The largest b in [lo, limit] with fits(b), given fits(lo) and, if hi, not fits(hi):
    doubling from lo while no hi is known, then bisecting."""
    if hi is None:
        hi = lo * 2
        while hi <= limit and fits(hi):
            lo, hi = hi, hi * 2
        if hi > limit:
            if fits(limit):
                return limit
            hi = limit
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def max_batch(workload: Union[Workload, Any], capacity: Optional[Size] = None, steps: int = 3,
              device: str = "cuda:0", config: str = "", limit: int = 1 << 16,
              workspace_bytes: Optional[int] = None) -> BatchSearch:
    """The largest batch whose steps replay on `capacity` without an out-of-memory error
    (bytes: the allocator's share; a card's name: what its context and handles leave; None: the
    card `device` names, else 24 GiB; as estimate takes it).

    Three captures (batches 2, 3, 4) test whether the trace is affine in the batch: the same
    allocations and frees, each size a + k * batch. When it is, the search replays the trace
    scaled to each batch tried (milliseconds each), and the answer is then checked by real
    captures at it and one above; when it is not, or the check disagrees, the search captures
    every batch it tries (doubling, then bisecting). The answer fits and answer + 1 does not
    (unless it is `limit`). ``tried`` and ``predicted`` list every batch looked at. A batch so
    large that the step asks for more than any device has (StepTooLargeError) does not fit.

    Every argument is checked before the first capture: TypeError or ValueError naming it,
    memscope.ConfigError for `config`."""
    workload, _ = _as_workload(workload, None)
    args = _arguments(workload, capacity, steps, device, config, workspace_bytes)
    _count(limit, "limit")
    _require_torch()
    from . import _capture

    t0 = time.perf_counter()
    tried: dict[int, bool] = {}
    predicted: dict[int, bool] = {}
    estimates: dict[int, Estimate] = {}
    captures: dict[int, Any] = {}

    def captured(b: int) -> bool:
        if b not in tried:
            t = time.perf_counter()
            c = _capture.capture(workload, b, steps, args.workspace, gpu=_gpu(args.device),
                                 capacity=args.capacity)
            captures[b] = c
            try:
                estimates[b] = _evaluate(c, b, steps, args, config, time.perf_counter() - t)
            except StepTooLargeError:
                tried[b] = False
            else:
                tried[b] = estimates[b].fits
        return tried[b]

    def done(b: int, affine: bool) -> BatchSearch:
        share = args.share(captures[min(captures)]) if captures else args.capacity
        return BatchSearch(b, share, tried, predicted, affine, estimates,
                           time.perf_counter() - t0, args.card.name if args.card else None)

    if limit < 4:  # too few batches for the affine model: capture each
        fits = [b for b in range(1, limit + 1) if captured(b)]
        return done(max(fits, default=0), False)
    for b in (2, 3, 4):
        captured(b)
    model = _affine_model({b: captures[b] for b in (2, 3, 4)})
    if model is not None:
        c2 = captures[2]

        def scaled(b: int) -> bool:
            if b in tried:
                return tried[b]
            if b not in predicted:
                events = model(b)
                if max(e[2] for e in events) >= _UNLIMITED:
                    predicted[b] = False
                    return False
                r = Trace.from_events(events, c2.tags, c2.stacks).replay(
                    capacity=max(1, args.share(c2)), config=config, top_sites=0)
                assert isinstance(r, ReplayResult)
                predicted[b] = not r.oom
            return predicted[b]

        if not scaled(1):
            if not captured(1):
                return done(0, True)
        answer = _largest_fitting(scaled, 1, None, limit)
        if answer >= 1 and captured(answer) and (answer == limit or not captured(answer + 1)):
            return done(answer, True)
    # Capture every batch tried, starting from what the captures so far say.
    fitting = [b for b, ok in tried.items() if ok]
    failing = [b for b, ok in tried.items() if not ok]
    if not fitting:
        if not captured(1):
            return done(0, model is not None)
        fitting = [1]
    lo = max(fitting)
    above = [b for b in failing if b > lo]
    return done(_largest_fitting(captured, lo, min(above) if above else None, limit),
                model is not None)


# The memscope command's exit codes (docs/cli.md, tools/memscope/cli.hpp).
EXIT_OK, EXIT_NO, EXIT_USAGE, EXIT_INPUT, EXIT_OUTPUT, EXIT_INTERNAL = 0, 1, 2, 3, 4, 5


class _Failure(Exception):
    """What ends the command: its message (one line) and exit code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _load_workload(spec: str) -> Workload:
    """FUNCTION of SCRIPT.py, the script run as a module: _Failure with the usage code for a
    spec that is not SCRIPT.py:FUNCTION, the input code for a script that is missing, does not
    run (a syntax error, an ImportError, sys.exit() at its top) or has no such function."""
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise _Failure(EXIT_USAGE, f"expected SCRIPT.py:FUNCTION, got {spec!r}")
    if not os.path.isfile(path):
        what = "is a folder" if os.path.isdir(path) else "no such file"
        raise _Failure(EXIT_INPUT, f"SCRIPT {path!r}: {what}; give SCRIPT.py:FUNCTION")
    spec_obj = importlib.util.spec_from_file_location("__memscope_workload__", path)
    if spec_obj is None or spec_obj.loader is None:
        raise _Failure(EXIT_INPUT, f"SCRIPT {path!r}: cannot be loaded as Python (give a .py "
                                   "file)")
    module = importlib.util.module_from_spec(spec_obj)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        spec_obj.loader.exec_module(module)
    except SystemExit as e:
        raise _Failure(EXIT_INPUT, f"SCRIPT {path!r} called sys.exit({e.code!r}) while it was "
                                   "loaded; keep the training out of the script's top level "
                                   "(under if __name__ == \"__main__\":)") from e
    except Exception as e:
        where = f" (line {e.lineno})" if isinstance(e, SyntaxError) and e.lineno else ""
        raise _Failure(EXIT_INPUT, f"SCRIPT {path!r} failed while it was loaded{where}: "
                                   f"{type(e).__name__}: {e}") from e
    fn = getattr(module, name, None)
    if not callable(fn):
        raise _Failure(EXIT_INPUT, f"SCRIPT {path!r} has no function {name!r}")
    return fn  # type: ignore[no-any-return]


def _workload_of(a: argparse.Namespace) -> Workload:
    """The command line's workload: SCRIPT.py:FUNCTION, or --hf MODEL."""
    if (a.workload is None) == (a.hf is None):
        raise _Failure(EXIT_USAGE, "give one of SCRIPT.py:FUNCTION or --hf MODEL")
    if a.hf is None:
        return _load_workload(a.workload)
    from . import _hf_workloads

    if a.seq < 1:
        raise _Failure(EXIT_USAGE, f"--seq must be positive, got {a.seq}")
    how = _hf_workloads.Training(bf16=a.bf16, fp16=a.fp16,
                                 gradient_checkpointing=a.gradient_checkpointing,
                                 optimizer=a.optim)
    try:
        return _hf_workloads.hf_workload(a.hf, seq=a.seq, how=how, attn_implementation=a.attn)
    except UsageError as err:  # names no model type, config class or config file
        raise _Failure(EXIT_USAGE, f"--hf {a.hf}: {err}") from err
    except ImportError as err:  # transformers missing: the environment
        raise _Failure(EXIT_INTERNAL, f"--hf {a.hf}: {err}") from err
    except (ValueError, OSError) as err:  # a config file that does not read
        raise _Failure(EXIT_INPUT, f"--hf {a.hf}: {err}") from err


def _write(option: str, path: str, content: bytes) -> None:
    from ._memscope import Error, _write_file_atomically

    try:
        _write_file_atomically(path, content)
    except Error as err:
        raise _Failure(EXIT_OUTPUT, f"{option} {path!r}: cannot be written ({err}); give a path "
                                    "in a folder that exists and is writable") from err


def _result_json(e: Estimate, s: Optional[BatchSearch]) -> bytes:
    """--json: the memscope envelope (include/memscope/json_envelope.hpp), the figures and the
    text the command printed, so that `memscope report` can show it again."""
    report = e.report()
    result: dict[str, Any] = {"format": "memscope-estimate", "version": 1,
                              "estimate": e.to_dict(), "text": report.to_text(),
                              "report": json.loads(report.to_json())}
    if s is not None:
        result["max_batch"] = {
            "batch": s.batch, "seconds": s.seconds, "affine": s.affine,
            "tried": {str(k): v for k, v in sorted(s.tried.items())},
            "predicted": {str(k): v for k, v in sorted(s.predicted.items())}}
        result["text"] += "\n" + s.explain()
    return (json.dumps(result, indent=2) + "\n").encode()


def _run(a: argparse.Namespace) -> int:
    """The command's work; _Failure carries what ends it otherwise."""
    from ._memscope import ConfigError

    try:
        _count(a.batch, "--batch")
        _count(a.steps, "--steps")
        _device(a.device)
        _capacity(a.capacity, a.device, "--capacity")
        _config(a.config)
    except (TypeError, ValueError, ConfigError) as err:
        raise _Failure(EXIT_USAGE, str(err)) from err
    try:
        _require_torch()
    except ImportError as err:
        raise _Failure(EXIT_INTERNAL, str(err)) from err
    from ._capture import CaptureError

    workload = _workload_of(a)
    try:
        e = estimate(workload, batch=a.batch, steps=a.steps, device=a.device,
                     capacity=a.capacity, config=a.config)
        print(e.explain())
        s = None
        if a.max_batch:
            s = max_batch(workload, capacity=a.capacity, steps=a.steps, device=a.device,
                          config=a.config)
            print(s.explain())
    except StepTooLargeError as err:
        raise _Failure(EXIT_USAGE, f"--batch {a.batch}: {err}") from err
    except (CaptureError, UsageError) as err:  # the script's step cannot be captured
        raise _Failure(EXIT_INPUT, str(err)) from err
    # Everything that can fail is made first; the files are then replaced one by one.
    page = e.report().to_html().encode() if a.html else b""
    if a.json:
        _write("--json", a.json, _result_json(e, s))
    if a.snapshot:
        _write("--snapshot", a.snapshot,
               e.trace.to_json().encode() if a.snapshot.endswith(".json")
               else e.trace.to_pickle())
    if a.html:
        _write("--html", a.html, page)
    return EXIT_OK if e.fits else EXIT_NO


def main(argv: Optional[list[str]] = None) -> int:
    """``python3 -m memscope._estimate_command SCRIPT.py:FUNCTION --batch 8 --capacity 24GiB``. Exit
    codes as every memscope command's (docs/cli.md): 0 fits, 1 does not fit on --capacity,
    2 a bad argument, 3 a script that is missing, does not load or whose step cannot be
    captured, 4 an output that cannot be written, 5 PyTorch missing or a bug."""
    p = argparse.ArgumentParser(
        prog="memscope estimate", allow_abbrev=False,  # tools/memscope/estimate reads these
        description="Estimate a training step's GPU memory without a GPU: FUNCTION(batch) in "
                    "SCRIPT.py builds the model on \"cuda\" and returns the step. Exit 0 when "
                    "it fits --capacity, 1 when it does not, 2 bad argument, 3 a script that "
                    "cannot be loaded or captured, 4 an output not written, 5 internal.")
    p.add_argument("workload", nargs="?", help="SCRIPT.py:FUNCTION")
    hf = p.add_argument_group("a Hugging Face model instead of a script (transformers, nothing "
                              "downloaded)")
    hf.add_argument("--hf", metavar="MODEL",
                    help="model type (gpt2, llama, bert...), config class (GPT2Config) or a "
                         "local config.json, built with random weights")
    hf.add_argument("--seq", type=int, default=512, help="sequence length (default 512)")
    hf.add_argument("--bf16", action="store_true", help="bf16 autocast, as Trainer's bf16=True")
    hf.add_argument("--fp16", action="store_true", help="fp16 autocast, as Trainer's fp16=True")
    hf.add_argument("--gradient-checkpointing", action="store_true")
    hf.add_argument("--optim", default="adamw_torch", help="a Trainer optim name (adamw_torch)")
    hf.add_argument("--attn", default="sdpa", help="attn_implementation (sdpa, eager)")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--capacity", default=None,
                   help="the GPU memory the allocator may use, with its unit (24GiB, 80GB), or "
                        "a card (h100-80gb, h200, a100-40gb...: the whole card, less the CUDA "
                        "context and the cuBLAS/cuDNN handles); default: the card --device "
                        "names, else 24GiB")
    p.add_argument("--config", default="", help="allocator settings (PYTORCH_CUDA_ALLOC_CONF)")
    p.add_argument("--device", default="cuda:0",
                   help="the GPU estimated for (e.g. h100, a100: its compute capability and "
                        "cuBLAS's workspace; a card such as h100 is also the capacity when "
                        "--capacity is not given)")
    p.add_argument("--max-batch", action="store_true", help="also search the largest batch")
    p.add_argument("--json", metavar="PATH", help="write the figures as JSON")
    p.add_argument("--html", metavar="PATH", help="write the replay's HTML report")
    p.add_argument("--snapshot", metavar="PATH",
                   help="write the trace as a PyTorch snapshot (memory_viz opens it)")
    a = p.parse_args(argv)
    try:
        return _run(a)
    except _Failure as f:
        print(f"memscope estimate: error: {f}", file=sys.stderr)
        return f.code
    except Exception as err:  # a bug: reported in one line, as the other commands do
        print(f"memscope estimate: error: internal: {type(err).__name__}: {err}",
              file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
