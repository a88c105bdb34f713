"""The torch.cuda-style module functions, each acting on the default allocator of a device.

Default allocators live in the extension (one per backend spec, shared with the PyTorch hooks
in memscope.torch), so ``memscope.memory_stats("cuda:0")`` and PyTorch's tensors see the same
allocator. Python keeps one ``Allocator`` object per spec so identity holds too.
"""

from __future__ import annotations

import glob
import os
import threading
from typing import Any, Optional, Union

from . import _memscope
from ._memscope import Allocator, Buffer, ConfigError, InvalidPointerError, PeakScope

Device = Union[None, int, str, Allocator, Any]  # Any: a torch.device

_lock = threading.Lock()
_allocators: dict[str, Allocator] = {}
_current: Optional[str] = None  # set_device(); None: "cuda:0" when CUDA works, else "host"


def cuda_is_available() -> bool:
    """True when the CUDA driver loads and at least one device is visible."""
    return bool(_memscope._cuda_available()[0])


def no_gpu_here() -> bool:
    """True where this machine shows no NVIDIA GPU at all: no kernel driver (/proc/driver/nvidia),
    no /dev/nvidia* device node, and MEMSCOPE_CUDA_DRIVER unset. Then CUDA being unavailable is
    the normal state of a CPU machine, not a failure; with a driver present, it is one."""
    if os.environ.get("MEMSCOPE_CUDA_DRIVER"):
        return False
    return not os.path.exists("/proc/driver/nvidia") and not glob.glob("/dev/nvidia*")


def device_count() -> int:
    """CUDA devices visible to this process (0 without a driver or GPU)."""
    return int(_memscope._cuda_device_count())


def current_device() -> str:
    """The spec ``device=None`` stands for: set_device()'s choice, else "cuda:0" or "host"."""
    if _current is not None:
        return _current
    return "cuda:0" if cuda_is_available() else "host"


def set_device(device: Device) -> None:
    """Makes ``device`` the one that ``device=None`` means from now on.

    Raises ConfigError when ``device`` names no device ("abc", an index past what a CUDA
    device index can be) and TypeError for other types, before anything changes."""
    global _current
    spec = _spec(device)
    _current = str(_memscope.BackendSpec(spec))  # the one parser: ConfigError naming it


def _spec(device: Device) -> str:
    if device is None:
        return current_device()
    if isinstance(device, Allocator):
        return device.backend
    if isinstance(device, bool):  # bool is an int; True is not a device
        raise TypeError("device must be an int, a str, a torch.device or an Allocator, not bool")
    if isinstance(device, int):
        if device < 0:
            raise ConfigError(f"device index {device} is negative")
        return f"cuda:{device}"
    if isinstance(device, str):
        if device == "cuda":
            cur = current_device()
            return cur if _cuda_index(cur) is not None else "cuda:0"
        if device == "cpu":
            return "host"
        return device
    kind, index = getattr(device, "type", None), getattr(device, "index", None)
    if kind == "cuda":  # torch.device("cuda"[, n])
        return _spec("cuda" if index is None else int(index))
    if kind == "cpu":
        return "host"
    raise TypeError(f"not a device: {device!r} (use an int, 'cuda:1', 'host' or an Allocator)")


def default_allocator(device: Device = None) -> Allocator:
    """The process-wide allocator of ``device``, created on first use (MEMSCOPE_ALLOC_CONF
    applies; a bad value raises ConfigError naming the key)."""
    if isinstance(device, Allocator):
        return device
    spec = _spec(device)
    with _lock:
        a = _allocators.get(spec)
        if a is None:
            a = _memscope._default_allocator(spec)
            # Another spelling of a backend we already have ("sim:1024MiB" and "sim:1GiB").
            a = _allocators.setdefault(a.backend, a)
            _allocators[spec] = a
        return a


def _created() -> list[Allocator]:
    with _lock:
        seen: dict[int, Allocator] = {}
        for a in _allocators.values():
            seen.setdefault(id(a), a)
        return list(seen.values())


# Raw memory --------------------------------------------------------------------------------


def alloc(size: int, device: Device = None, stream: Any = None) -> int:
    """Allocates ``size`` bytes on ``device``; returns the address (an int; 0 for size 0)."""
    return default_allocator(device).alloc(size, stream)


def free(address: int, device: Device = None) -> None:
    """Frees an address from alloc(). Without ``device`` the allocator that owns it is found.
    Freeing twice raises InvalidPointerError."""
    if device is not None:
        default_allocator(device).free(address)
        return
    if address == 0:
        return
    for a in _created():
        if a.lookup(address) is not None:
            a.free(address)
            return
    raise InvalidPointerError(
        f"free({address:#x}): not a live allocation of any default allocator "
        "(double free or foreign pointer)")


def buffer(nbytes: int, device: Device = None, stream: Any = None) -> Buffer:
    """A Buffer of ``nbytes`` on ``device`` that frees itself (numpy.asarray(buf) on host)."""
    return default_allocator(device).buffer(nbytes, stream)


def record_stream(address: Union[int, Buffer], stream: Any, device: Device = None) -> None:
    """After ``address`` is freed, its memory is not reused before work queued on ``stream``
    so far has completed."""
    allocator = default_allocator(device if device is not None else
                                  (address.allocator if isinstance(address, Buffer) else None))
    allocator.record_stream(address, stream)


def peak_scope(device: Device = None) -> PeakScope:
    """An independent, nestable peak window (``with memscope.peak_scope() as s: ...;
    s.peak.allocated_bytes``), untouched by reset_peak_memory_stats()."""
    return default_allocator(device).peak_scope()


# Statistics, with torch.cuda's names -------------------------------------------------------


def empty_cache(device: Device = None) -> int:
    """Returns cached memory with no live allocation to the backend (the driver, for CUDA);
    returns the bytes released."""
    return default_allocator(device).empty_cache()


def memory_allocated(device: Device = None) -> int:
    return default_allocator(device).memory_allocated()


def max_memory_allocated(device: Device = None) -> int:
    return default_allocator(device).max_memory_allocated()


def memory_reserved(device: Device = None) -> int:
    return default_allocator(device).memory_reserved()


def max_memory_reserved(device: Device = None) -> int:
    return default_allocator(device).max_memory_reserved()


def reset_peak_memory_stats(device: Device = None) -> None:
    default_allocator(device).reset_peak_memory_stats()


def reset_accumulated_memory_stats(device: Device = None) -> None:
    default_allocator(device).reset_accumulated_memory_stats()


def memory_stats(device: Device = None) -> dict[str, int]:
    """The flat dict of torch.cuda.memory_stats(), same keys ("allocated_bytes.all.current",
    "num_alloc_retries", ...), sorted by key."""
    return default_allocator(device).memory_stats()


def memory_summary(device: Device = None, abbreviated: bool = False) -> str:
    """A readable table of memory_stats(). ``abbreviated`` is accepted for torch
    compatibility; the table is always the full one."""
    del abbreviated
    return default_allocator(device).memory_summary()


def memory_snapshot(device: Device = None) -> list[dict[str, Any]]:
    """The segments and their blocks, in torch.cuda.memory_snapshot()'s shape."""
    segments: list[dict[str, Any]] = default_allocator(device).snapshot()["segments"]
    return segments


def set_per_process_memory_fraction(fraction: float, device: Device = None) -> None:
    """Caps what the allocator may reserve at ``fraction`` of the device's capacity; raises
    ConfigError unless 0 < fraction <= 1."""
    default_allocator(device).set_memory_fraction(fraction)


# The device as the driver (or the OS) sees it ----------------------------------------------


def mem_get_info(device: Device = None) -> tuple[int, int]:
    """(free, total) bytes of the device for every process, as cudaMemGetInfo reports; for the
    host, MemAvailable and MemTotal; for a simulated device, its capacity minus reserved."""
    return default_allocator(device).mem_get_info()


def _cuda_index(spec: str) -> Optional[int]:
    """The CUDA device index of a spec ("cuda:1" -> 1), None for host and simulated devices;
    ConfigError for a spec that is none of them (BackendSpec is the one parser)."""
    parsed = _memscope.BackendSpec(spec)
    return parsed.index if parsed.type == "cuda" else None


def device_memory_used(device: Device = None) -> int:
    """Bytes in use on the device by every process, as nvidia-smi shows them (NVML, else
    cuMemGetInfo); for the host and simulated devices, total minus free."""
    spec = _spec(device)
    index = _cuda_index(spec)
    if index is not None:
        return int(_memscope._device_memory_info(index)["used"])
    a = device if isinstance(device, Allocator) else default_allocator(spec)
    free_bytes, total = a.mem_get_info()
    return total - free_bytes


def gpu_processes(device: Device = None) -> list[dict[str, Any]]:
    """Processes with memory on the device: [{"pid", "used_bytes"}] (used_bytes None where the
    platform cannot attribute it). Empty for host and simulated devices. Raises
    BackendUnavailableError where NVML cannot be used."""
    index = _cuda_index(_spec(device))
    if index is None:
        return []
    probe = _memscope.NvmlProbe()
    return list(probe.processes(probe.nvml_index_of(index)))


def list_gpu_processes(device: Device = None) -> str:
    """A readable list of the processes using the device, like torch.cuda.list_gpu_processes();
    says why when it cannot tell."""
    spec = _spec(device)
    if _cuda_index(spec) is None:
        return f"{spec}: not a GPU; no GPU processes"
    try:
        procs = gpu_processes(spec)
    except _memscope.Error as e:
        return f"{spec}: {e}"
    lines = [spec.upper().replace("CUDA", "GPU")]
    if not procs:
        lines.append("no processes are running")
    for p in procs:
        used = p["used_bytes"]
        text = "an unknown amount of" if used is None else _memscope.format_bytes(used)
        lines.append(f"process {p['pid']:>10d} uses {text} GPU memory")
    return "\n".join(lines)
