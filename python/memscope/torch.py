"""PyTorch integration (imported on demand; needs torch).

``use_as_allocator()`` routes PyTorch's CUDA allocations through memscope with
``torch.cuda.memory.CUDAPluggableAllocator``: the C entry points live in memscope's own
extension module, so ``memscope.memory_stats()``, peak scopes and the Tracker see every tensor,
with nested peaks PyTorch's single global counter cannot give. Call it before the first CUDA
tensor is created (PyTorch refuses to swap an allocator it has used).

``watch()`` explains an out-of-memory error inside the job (docs/oom.md): PyTorch's allocation
history is recorded in a bounded ring and, at the OOM, the snapshot, memscope's report and one
screen of explanation (with what would have fitted) are written; the error is re-raised
unchanged. ``track_growth()`` and ``step()`` test whether memory grows across iterations.

``torch_source()`` is a Tracker source over ``torch.cuda.memory_allocated()`` for when PyTorch
keeps its own allocator. PyTorch has one peak counter per device, so this source shares it:
every window it opens resets that counter after folding its value into the innermost open
window (the cascade rule, applied by memscope's C++ core: ``memscope._memscope.CascadeSource``),
which keeps nested windows exact as long as nobody else calls
``torch.cuda.reset_peak_memory_stats()``; its mode says so.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

try:
    import torch as _torch
except ImportError as _e:  # pragma: no cover - exercised only where torch is absent
    raise ImportError("memscope.torch needs PyTorch (pip install torch)") from _e

from . import _api, _memscope
from ._memscope import Allocator, BackendUnavailableError, CascadeSource, Trace, UsageError
from ._oom_watch import OomFiles, OomWatch

if TYPE_CHECKING:
    from typing_extensions import Self

    from ._growth import GrowthTracker, MemoryGrowthError, MemoryGrowthWarning

_GROWTH_NAMES = ("GrowthTracker", "MemoryGrowthError", "MemoryGrowthWarning")


def __getattr__(name: str) -> Any:
    """The growth tracker's classes, imported on first use: memscope._growth needs the whole
    of PyTorch (its dispatch modes), which use_as_allocator() and torch_source() do not."""
    if name in _GROWTH_NAMES:
        from . import _growth

        return getattr(_growth, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["use_as_allocator", "is_allocator", "library_path", "torch_source", "TorchCudaSource",
           "watch", "Watch", "OomFiles", "step", "track_growth", "GrowthTracker",
           "MemoryGrowthError", "MemoryGrowthWarning"]

_state_lock = threading.Lock()
_pluggable: Optional[Any] = None


def library_path() -> str:
    """The shared object that exports memscope_torch_malloc / memscope_torch_free."""
    return _memscope.__file__


def is_allocator() -> bool:
    """True once use_as_allocator() has installed memscope in this process."""
    return _pluggable is not None


def _attach_optional_hooks(pluggable: Any) -> list[str]:
    """Wires record_stream and empty_cache where this PyTorch build lets Python set them;
    returns what could not be wired."""
    import ctypes

    lib = ctypes.CDLL(library_path())
    native = pluggable.allocator() if callable(getattr(pluggable, "allocator", None)) else None
    missing = []
    for setter, symbol in (("set_record_stream_fn", "memscope_torch_record_stream"),
                           ("set_reset_fn", "memscope_torch_empty_cache"),
                           ("set_memory_fraction_fn", "memscope_torch_set_memory_fraction")):
        fn = getattr(native, setter, None)
        if fn is None:
            missing.append(setter)
            continue
        fn(ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value)
    return missing


def use_as_allocator() -> Any:
    """Makes memscope PyTorch's CUDA allocator for this process; returns the
    CUDAPluggableAllocator. Idempotent. Raises BackendUnavailableError without CUDA and
    UsageError when PyTorch has already allocated CUDA memory with its own allocator."""
    global _pluggable
    with _state_lock:
        if _pluggable is not None:
            return _pluggable
        if not _torch.cuda.is_available():
            raise BackendUnavailableError("PyTorch sees no CUDA device; nothing to route")
        available, reason = _memscope._cuda_available()
        if not available:
            raise BackendUnavailableError(f"memscope cannot use CUDA here: {reason}")
        pluggable = _torch.cuda.memory.CUDAPluggableAllocator(
            library_path(), "memscope_torch_malloc", "memscope_torch_free")
        try:
            _torch.cuda.memory.change_current_allocator(pluggable)
        except RuntimeError as e:
            raise UsageError(
                "PyTorch has already initialised its CUDA allocator; call "
                "memscope.torch.use_as_allocator() before the first CUDA tensor is created "
                f"({e})") from e
        missing = _attach_optional_hooks(pluggable)
        if "set_record_stream_fn" in missing:
            import warnings

            warnings.warn("this PyTorch does not let Python set a record_stream hook: "
                          "Tensor.record_stream() is a no-op with memscope as the allocator; "
                          "call memscope.record_stream(tensor.data_ptr(), stream) instead",
                          RuntimeWarning, stacklevel=2)
        _pluggable = pluggable
        return pluggable


class TorchCudaSource(CascadeSource):
    """A Tracker source over torch.cuda.memory_allocated(device), with nested-exact peaks from
    PyTorch's one peak counter (see the module docstring)."""

    def __init__(self, device: Optional[int] = None) -> None:
        index = _torch.cuda.current_device() if device is None else int(device)
        available = bool(_torch.cuda.is_available())
        super().__init__(
            name=f"torch.cuda:{index}", kind="gpu",
            mode=("torch.cuda max_memory_allocated (PyTorch's single global peak counter, "
                  "reset by memscope per window; other resets break nested peaks)"),
            current=lambda: _torch.cuda.memory_allocated(index),
            peak=lambda: _torch.cuda.max_memory_allocated(index),
            reset_peak=lambda: _torch.cuda.reset_peak_memory_stats(index),
            available=available, reason="" if available else "PyTorch sees no CUDA device")


_sources: dict[int, TorchCudaSource] = {}


def torch_source(device: Optional[int] = None) -> TorchCudaSource:
    """The TorchCudaSource of ``device`` (one per device: windows must share one stack)."""
    index = _torch.cuda.current_device() if device is None else int(device)
    with _state_lock:
        return _sources.setdefault(index, TorchCudaSource(index))


# ---- Out-of-memory forensics ---------------------------------------------------------------


class Watch:
    """What watch() returned: ``files`` lists what each out-of-memory error wrote (newest
    last); ``close()`` stops explaining (PyTorch cannot detach an observer: it stays, idle)."""

    def __init__(self, oom: OomWatch) -> None:
        self._oom = oom
        self.active = True

    @property
    def files(self) -> list[OomFiles]:
        return list(self._oom.written)

    def close(self) -> None:
        self.active = False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_watches: list[Watch] = []


def _observe_memscope(allocator: Allocator, watch: Watch, max_entries: int) -> None:
    """memscope's allocator (simulated, or PyTorch's through use_as_allocator()): record its
    history and explain its OOMs from its own recording."""
    if not allocator.recording:
        allocator.start_recording(max_entries=max_entries, stacks="python")
    # The allocator keeps the observer: a strong reference back would keep both forever.
    allocator_ref = weakref.ref(allocator)
    backend = allocator.backend

    def write(path: Path) -> Trace:
        a = allocator_ref()
        if a is None:
            raise UsageError("the watched allocator is gone")
        trace = a.recorded_snapshot()
        trace.save(path)
        return trace

    def observer(figures: dict[str, int]) -> None:
        if not watch.active:
            return
        capacity = figures["reserved"] + figures["device_free"]
        if figures["limit"]:
            capacity = min(capacity, figures["limit"])
        watch._oom.handle(backend, write, device=0, capacity=capacity)

    allocator.add_oom_observer(observer)


def _torch_limit(device: int, total: int) -> int:
    fraction = getattr(_torch.cuda, "get_per_process_memory_fraction", None)
    try:
        return int(fraction(device) * total) if fraction is not None else total
    except (RuntimeError, TypeError):
        return total


def _live_figures(device: int) -> Any:
    """What only the running job can measure: the device's total, what other processes hold and
    this process's memory outside PyTorch's allocator (NVML per process minus reserved)."""

    def fill(x: Any) -> None:
        x.device_total = int(_torch.cuda.mem_get_info(device)[1])
        x.live_source = "torch.cuda.mem_get_info"
        try:
            processes = _api.gpu_processes(device)
        except Exception:  # NVML absent: the totals alone
            return
        mine = sum(p["used_bytes"] or 0 for p in processes if p["pid"] == os.getpid())
        x.other_processes = sum(p["used_bytes"] or 0 for p in processes
                                if p["pid"] != os.getpid())
        x.outside_allocator = max(0, mine - int(_torch.cuda.memory_reserved(device)))
        x.live_source = "torch.cuda.mem_get_info, NVML"

    return fill


def _observe_torch(watch: Watch, max_entries: int) -> None:
    """PyTorch's own CUDA caching allocator: its history in a ring of max_entries, and an OOM
    observer that dumps its snapshot and explains it."""
    _torch.cuda.memory._record_memory_history(max_entries=max_entries)

    def observer(device: int, alloc: int, device_allocated: int, device_free: int) -> None:
        if not watch.active:
            return

        def write(path: Path) -> Trace:
            import pickle

            data = pickle.dumps(_torch.cuda.memory._snapshot(), protocol=4)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
            return _memscope.load_trace(path)

        total = int(_torch.cuda.mem_get_info(device)[1])
        reserved = int(_torch.cuda.memory_reserved(device))
        capacity = min(reserved + int(device_free), _torch_limit(device, total))
        watch._oom.handle(f"cuda:{device}", write, device=device, capacity=capacity,
                          live=_live_figures(device))

    attach = getattr(_torch._C, "_cuda_attach_out_of_memory_observer", None)
    if attach is None:
        raise BackendUnavailableError(
            "this PyTorch has no out-of-memory observer (torch._C."
            "_cuda_attach_out_of_memory_observer); memscope.torch.watch needs PyTorch 2.1 or later")
    attach(observer)


def watch(directory: Union[str, os.PathLike[str]] = ".", *, max_entries: int = 100_000,
          allocator: Optional[Allocator] = None, counterfactuals: bool = True) -> Watch:
    """Explains every out-of-memory error of this job where it happens (docs/oom.md).

    Records allocation history in a ring of ``max_entries`` events and, at an OOM, writes
    ``oom-rank{R}-pid{P}.pickle`` (PyTorch's snapshot format; a later OOM writes ``-2``, ``-3``
    ... never over an earlier one) with memscope's report beside it (``.json``, ``.html``), and
    prints the explanation on stderr: the request, the allocator's reserved, allocated and
    cached bytes and its largest free block, the device's total and others' usage, memory
    outside the allocator, what was live by site and category, and whether
    expandable_segments, a max_split_size or garbage_collection_threshold would have fitted
    (the recorded window replayed on a simulated device of the capacity the job could reach).
    The error itself is raised unchanged; nothing is done until one happens.

    ``allocator``: a memscope Allocator to watch (a simulated device, for tests). Without it,
    PyTorch's CUDA allocator is watched, or memscope's when use_as_allocator() made it
    PyTorch's. BackendUnavailableError where there is neither a CUDA device nor an allocator.
    """
    if max_entries <= 0:
        raise UsageError(f"watch(max_entries={max_entries}): keep at least one event")
    w = Watch(OomWatch(Path(directory), counterfactuals=counterfactuals))
    if allocator is not None:
        _observe_memscope(allocator, w, max_entries)
    elif is_allocator():
        for index in range(_torch.cuda.device_count()):
            _observe_memscope(_api.default_allocator(index), w, max_entries)
    elif _torch.cuda.is_available():
        _observe_torch(w, max_entries)
    else:
        raise BackendUnavailableError(
            "memscope.torch.watch: PyTorch sees no CUDA device; pass allocator= (a memscope "
            "Allocator, e.g. memscope.Allocator('sim:24GiB')) to watch that one")
    _watches.append(w)
    return w


# ---- Growth across iterations --------------------------------------------------------------

_tracker: Optional[GrowthTracker] = None


@contextmanager
def track_growth(min_iterations: int = 3, fail_on_growth: bool = False,
                 optimizer: Optional[Any] = None) -> Iterator[GrowthTracker]:
    """Records the tensors the job makes and tests, at each step(), whether memory allocated
    in one iteration stays alive through the next ones (docs/oom.md, "Growth"). Warns once
    (MemoryGrowthWarning) when growth is established; fail_on_growth=True raises
    MemoryGrowthError instead. ``optimizer``: its step() marks the boundaries (a hook), so the
    loop need not call memscope.torch.step()."""
    from ._growth import GrowthTracker

    global _tracker
    if _tracker is not None:
        raise UsageError("memscope.torch.track_growth() is already active")
    tracker = GrowthTracker(min_iterations=min_iterations, fail_on_growth=fail_on_growth)
    handle = None
    if optimizer is not None:
        handle = optimizer.register_step_post_hook(lambda *_: step())
    _tracker = tracker
    try:
        with tracker:
            yield tracker
    finally:
        _tracker = None
        if handle is not None:
            handle.remove()


def step() -> None:
    """Marks the end of an iteration for track_growth() (a no-op without it)."""
    tracker = _tracker
    if tracker is not None:
        tracker.step()
