"""PyTorch integration (imported on demand; needs torch).

``use_as_allocator()`` routes PyTorch's CUDA allocations through memscope with
``torch.cuda.memory.CUDAPluggableAllocator``: the C entry points live in memscope's own
extension module, so ``memscope.memory_stats()``, peak scopes and the Tracker see every tensor,
with nested peaks PyTorch's single global counter cannot give. Call it before the first CUDA
tensor is created (PyTorch refuses to swap an allocator it has used).

``torch_source()`` is a Tracker source over ``torch.cuda.memory_allocated()`` for when PyTorch
keeps its own allocator. PyTorch has one peak counter per device, so this source shares it:
every window it opens resets that counter after folding its value into the innermost open
window (the cascade rule, applied by memscope's C++ core: ``memscope._memscope.CascadeSource``),
which keeps nested windows exact as long as nobody else calls
``torch.cuda.reset_peak_memory_stats()``; its mode says so.
"""

from __future__ import annotations

import threading
from typing import Any, Optional

try:
    import torch as _torch
except ImportError as _e:  # pragma: no cover - exercised only where torch is absent
    raise ImportError("memscope.torch needs PyTorch (pip install torch)") from _e

from . import _memscope
from ._memscope import BackendUnavailableError, CascadeSource, UsageError

__all__ = ["use_as_allocator", "is_allocator", "library_path", "torch_source", "TorchCudaSource"]

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
