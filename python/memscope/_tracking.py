"""Stage tracking: per-stage CPU and GPU memory with the Hugging Face Trainer's metric names.

    t = memscope.Tracker()
    with t.stage("train"):
        with t.stage("eval"):      # nested: both exact
            ...
    t.metrics   # {"init_mem_cpu_alloc_delta": ..., "train_mem_cpu_alloc_delta": ..., ...}

Keys (bytes): {stage}_mem_{cpu,gpu}_alloc_delta (end - begin, may be negative) and
{stage}_mem_{cpu,gpu}_peaked_delta (max(0, peak - end)); {stage}_runtime in seconds. Every
value is a number; how each source measured (and why one is unavailable) is ``t.notes``, once
per source, which ``t.log_metrics()`` prints under the table (report_modes=True also puts
{stage}_mem_{label}_mode and _peak_bound in every stage's metrics). Memory spent before the
first stage is reported once as init_* (with before_init_mem_*), as the Trainer does.
MEMSCOPE_SKIP_MEMORY_METRICS=1 (or skip_memory_metrics=True) makes the tracker free.

Metric values given to log_metrics, save_metrics and metrics_format are ints (anything with
__index__, such as numpy integers; at most signed 64 bits, a larger one is a ValueError: pass a
float), floats (anything with __float__) or strings; any other type is a TypeError naming the key.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Optional, TextIO, Union

from . import _memscope
from ._api import Device, _cuda_index, current_device, default_allocator
from ._memscope import (
    MemorySource,
    format_metrics_table,
    is_memory_key,
    load_metrics,
    metric_unit,
    metrics_format,
)

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

__all__ = ["Tracker", "track", "default_tracker", "metrics_format", "metric_unit", "is_memory_key",
           "log_metrics", "save_metrics", "load_metrics", "MemorySource", "host_source",
           "allocator_source", "unavailable_source", "nvml_source"]


def host_source(pid: int = 0, force_sampling: bool = False,
                sampling_interval: float = 0.001) -> MemorySource:
    """RSS of a process (pid 0: this one) with exact peaks from the kernel's high-water mark, or
    from a sampling thread every ``sampling_interval`` seconds where that is unavailable."""
    return _memscope._host_source(pid, force_sampling, sampling_interval)


def allocator_source(device: Device = None, kind: Optional[str] = None) -> MemorySource:
    """allocated_bytes of an allocator (what torch.cuda.memory_allocated reports), exact through
    peak scopes. ``kind`` defaults to "cpu" for a host allocator and "gpu" otherwise."""
    a = default_allocator(device)
    if kind is None:
        kind = "cpu" if a.kind == "host" else "gpu"
    return _memscope._allocator_source(a, kind)


def unavailable_source(kind: str, name: str, reason: str) -> MemorySource:
    """A placeholder that measures nothing; reports print the reason."""
    return _memscope._unavailable_source(kind, name, reason)


def nvml_source(cuda_device: int = 0, device_wide: bool = False,
                sampling_interval: float = 0.01) -> MemorySource:
    """GPU memory as nvidia-smi shows it (this process, or the whole device), peaks by polling
    NVML every ``sampling_interval`` seconds while a window is open."""
    return _memscope._nvml_source(cuda_device, device_wide, sampling_interval)


def _default_gpu_source() -> Any:
    """What the Trainer calls "gpu": allocated bytes on the current CUDA device, from memscope's
    allocator when it serves PyTorch (or PyTorch is not loaded), else from PyTorch's counters."""
    ms_torch = sys.modules.get("memscope.torch")
    torch = sys.modules.get("torch")
    use_torch = torch is not None and torch.cuda.is_available() and not (
        ms_torch is not None and ms_torch.is_allocator())
    if use_torch:
        from . import torch as ms_torch_module
        return ms_torch_module.torch_source()
    available, reason = _memscope._cuda_available()
    if not available:
        return unavailable_source("gpu", "cuda", reason)
    device = current_device()
    return allocator_source(device if _cuda_index(device) is not None else "cuda:0", "gpu")


def _sources(sources: Optional[Iterable[Any]], allocators: Optional[Iterable[Device]]) -> list[Any]:
    if sources is not None:
        return list(sources)
    out: list[Any] = [host_source()]
    if allocators is not None:
        out += [allocator_source(a) for a in allocators]
    else:
        out.append(_default_gpu_source())
    return out


class _Stage(contextlib.ContextDecorator):
    """``with tracker.stage(name):`` and ``@tracker.stage(name)``."""

    def __init__(self, tracker: Tracker, name: str) -> None:
        self._tracker, self.name = tracker, name

    def __enter__(self) -> Self:
        self._tracker.start(self.name)
        return self

    def __exit__(self, *exc: object) -> None:
        self._tracker.stop(self.name)

    @property
    def metrics(self) -> dict[str, Any]:
        """This stage's metrics (once it has stopped)."""
        return self._tracker.stage_metrics(self.name)


class Tracker:
    """Exact per-stage memory metrics; stages nest and overlap freely.

    sources: MemorySource objects (or Python objects of the same shape) to watch; by default
    this process's RSS ("cpu") and, as "gpu", allocated bytes on the current CUDA device
    (memscope's allocator when it serves PyTorch or PyTorch is not loaded, else PyTorch's
    counters; an "unavailable" entry without a GPU).
    allocators: instead of the default "gpu", these allocators or devices (e.g. "sim:8GiB").
    """

    def __init__(self, sources: Optional[Iterable[Any]] = None, *,
                 allocators: Optional[Iterable[Device]] = None,
                 skip_memory_metrics: bool = False, absolute_values: bool = False,
                 report_modes: bool = False, implicit_init: bool = True) -> None:
        skip = skip_memory_metrics or _memscope._skip_memory_metrics_from_env()
        # A skipped tracker is free: it opens no source, so do not even build them.
        srcs = [] if skip else _sources(sources, allocators)
        self._impl = _memscope._Tracker(srcs, skip, absolute_values, report_modes,
                                        implicit_init)
        self._lock = threading.Lock()
        self._metrics: dict[str, Any] = {}

    def start(self, stage: str) -> None:
        self._impl.start(stage)

    def stop(self, stage: str) -> dict[str, Any]:
        """Stops ``stage``, adds its metrics to ``metrics`` and returns them."""
        self._impl.stop(stage)
        if not self._impl.enabled:
            return {}
        stage_metrics = self._impl.metrics(stage)
        with self._lock:
            self._metrics.update(self._impl.init_metrics())
            self._metrics.update(stage_metrics)
        return stage_metrics

    def stage(self, name: str) -> _Stage:
        """A context manager (and decorator) that runs ``name`` as a stage."""
        return _Stage(self, name)

    def stage_metrics(self, stage: str) -> dict[str, Any]:
        """The metrics of the last finished run of ``stage`` (without init_*)."""
        if not self._impl.enabled:
            return {}
        return self._impl.metrics(stage)

    def update_metrics(self, stage: str, metrics: dict[str, Any]) -> None:
        """Adds the stage's metrics to ``metrics`` in place, as the Trainer's
        stop_and_update_metrics does; the first call also adds init_* and before_init_*."""
        if not self._impl.enabled:
            return
        # Only the added keys go back into `metrics`, so its other values keep their types.
        metrics.update(self._impl.update_metrics(stage, {}))

    @property
    def metrics(self) -> dict[str, Any]:
        """Every metric reported so far (a copy)."""
        with self._lock:
            return dict(self._metrics)

    @property
    def enabled(self) -> bool:
        return bool(self._impl.enabled)

    def sources(self) -> list[dict[str, Any]]:
        """[{label, name, kind, available, mode}] for each source."""
        return self._impl.sources()

    @property
    def notes(self) -> dict[str, str]:
        """How each source measures, once per source label: {"cpu": "host rss (pid 42),
        kernel-hwm, peaks within 744.00 KiB", "gpu": "cuda unavailable: ..."}."""
        return self._impl.notes() if self._impl.enabled else {}

    def describe_sources(self) -> str:
        return self._impl.describe_sources()

    def running_stages(self) -> list[str]:
        return self._impl.running_stages()

    def log_metrics(self, split: str = "all", file: Optional[TextIO] = None,
                    trainer_compat: bool = False) -> None:
        """The table of every metric so far, and the sources' notes once under it."""
        log_metrics(split, self.metrics, file=file, trainer_compat=trainer_compat,
                    notes=self.notes)

    def save_metrics(self, split: str, output_dir: Union[str, os.PathLike[str]] = ".",
                     combined: bool = True) -> None:
        save_metrics(split, self.metrics, output_dir, combined)


_default_lock = threading.Lock()
_default: Optional[Tracker] = None


def default_tracker() -> Tracker:
    """The tracker memscope.track() uses, created on first use with the default sources."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Tracker()
        return _default


def track(stage: str) -> _Stage:
    """Runs ``stage`` on the default tracker: ``with memscope.track("train"): ...`` or as a
    decorator ``@memscope.track("eval")``. Metrics: ``memscope.default_tracker().metrics``."""
    return _Stage(default_tracker(), stage)


def log_metrics(split: str, metrics: dict[str, Any], file: Optional[TextIO] = None,
                trainer_compat: bool = False, notes: Optional[dict[str, str]] = None) -> None:
    """Prints "***** {split} metrics *****" and an aligned table, one block per stage, then
    ``notes`` ({label: text}, such as Tracker.notes) once."""
    print(format_metrics_table(split, metrics, trainer_compat, notes or {}),
          end="", file=file if file is not None else sys.stdout)


def save_metrics(split: str, metrics: dict[str, Any],
                 output_dir: Union[str, os.PathLike[str]] = ".", combined: bool = True) -> None:
    """Writes {split}_results.json and merges into all_results.json (atomically, keeping keys
    already there)."""
    _memscope.save_metrics(split, metrics, output_dir, combined)
