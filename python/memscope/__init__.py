"""memscope: GPU and host memory management and accounting.

A caching allocator with ``torch.cuda``'s statistics (``memscope.Allocator`` and the module
functions below, which act on a default allocator per device), exact nested peak scopes, a stage
tracker with the Hugging Face Trainer's metric names (``memscope.Tracker``, ``memscope.track``),
host memory readings (``memscope.host``), traces (``memscope.load_trace``: a PyTorch snapshot or
an RMM log replayed on a simulated device, its peak explained, settings compared, the smallest
device it fits on found), estimates of a training step's memory without a GPU
(``memscope.estimate``, ``memscope.max_batch``: PyTorch fake tensors, imported on first use),
and integrations with PyTorch (``memscope.torch``)
and the Trainer (``memscope.hf``), both imported on first use, as is ``memscope.distributed``
(metrics gathered across ranks): ``import memscope`` imports
neither torch nor transformers; ``memscope.hf`` (or ``memscope.torch``) imports the module then,
and raises its ImportError where transformers (or torch) is missing.

``device`` arguments accept an int (CUDA device index), ``"cuda"``, ``"cuda:1"``, ``"host"``,
``"sim:<size>"`` (a simulated device), a ``torch.device``, or an ``Allocator``; ``None`` is the
current device: the current CUDA device when there is one, else the host.

``memscope.Report`` renders what memscope shows (tables, summary lines, a memory chart) as the
terminal's text, JSON or one self-contained HTML page, through the renderers the ``memscope``
command uses.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

from . import host
from ._api import (
    alloc,
    buffer,
    cuda_is_available,
    current_device,
    default_allocator,
    device_count,
    device_memory_used,
    empty_cache,
    free,
    gpu_processes,
    list_gpu_processes,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_snapshot,
    memory_stats,
    memory_summary,
    peak_scope,
    record_stream,
    reset_accumulated_memory_stats,
    reset_peak_memory_stats,
    set_device,
    set_per_process_memory_fraction,
)
from ._memscope import (
    Allocator,
    BackendError,
    BackendSpec,
    BackendUnavailableError,
    Buffer,
    Comparison,
    ConfigError,
    Error,
    FitResult,
    GrowthResult,
    GrowthSite,
    InvalidPointerError,
    LiveBreakdown,
    OomCounterfactual,
    OomExplanation,
    OutOfMemoryError,
    PeakScope,
    PeakValues,
    ReplayMoment,
    ReplayResult,
    ReplaySite,
    Report,
    ReportBand,
    ReportFormatError,
    ReportMarker,
    ReportSeries,
    ReportTable,
    Trace,
    TraceFormatError,
    UsageError,
    __version__,
    format_bytes,
    format_size_exact,
    load_trace,
    parse_size,
    process_peak_rss,
    stage_marks_enabled,
    write_stage_mark,
)

__all__ = [
    "Allocator", "BackendSpec", "Buffer", "PeakScope", "PeakValues",
    "Error", "OutOfMemoryError", "ConfigError", "BackendUnavailableError", "BackendError",
    "InvalidPointerError", "TraceFormatError", "UsageError",
    "alloc", "free", "buffer", "record_stream", "peak_scope",
    "empty_cache", "memory_allocated", "max_memory_allocated", "memory_reserved",
    "max_memory_reserved", "reset_peak_memory_stats", "reset_accumulated_memory_stats",
    "memory_stats", "memory_summary", "memory_snapshot", "mem_get_info", "device_memory_used",
    "list_gpu_processes", "gpu_processes", "set_per_process_memory_fraction",
    "cuda_is_available", "device_count", "current_device", "set_device", "default_allocator",
    "format_bytes", "format_size_exact", "parse_size", "host", "__version__",
    "process_peak_rss", "stage_marks_enabled", "write_stage_mark",
    "Trace", "load_trace", "ReplayResult", "ReplayMoment", "ReplaySite", "LiveBreakdown",
    "FitResult",
    "Comparison",
    "OomExplanation", "OomCounterfactual", "GrowthResult", "GrowthSite",
    "Report", "ReportTable", "ReportSeries", "ReportBand", "ReportMarker", "ReportFormatError",
]

from ._capture import CaptureError
from ._devices import UnknownDeviceError
from ._estimate import BatchSearch, CardUse, Estimate, StepTooLargeError, estimate, max_batch
from ._tracking import (
    MemorySource,
    Tracker,
    allocator_source,
    default_tracker,
    host_source,
    is_memory_key,
    load_metrics,
    log_metrics,
    metric_unit,
    metrics_format,
    nvml_source,
    save_metrics,
    track,
    unavailable_source,
)

__all__ += [
    "Tracker", "track", "default_tracker", "metrics_format", "metric_unit", "is_memory_key",
    "log_metrics", "save_metrics",
    "load_metrics", "MemorySource", "host_source", "allocator_source", "unavailable_source",
    "nvml_source", "estimate", "max_batch", "Estimate", "BatchSearch", "CaptureError",
    "StepTooLargeError", "UnknownDeviceError", "CardUse",
]

if TYPE_CHECKING:  # for type checkers; at run time __getattr__ imports them on first use
    from . import distributed as distributed
    from . import hf as hf
    from . import torch as torch

_ON_DEMAND = ("hf", "torch", "distributed")


def __getattr__(name: str) -> ModuleType:
    """memscope.hf, memscope.torch and memscope.distributed (metrics across ranks; it imports
    torch or mpi4py only when a gather runs), imported on first use (PEP 562)."""
    if name in _ON_DEMAND:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

# MEMSCOPE_WATCH=DIR (memscope run --watch DIR): explain out-of-memory errors once torch loads.
from ._oom_watch import honour_environment as _honour_environment  # noqa: E402

_honour_environment()
