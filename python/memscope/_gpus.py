"""The GPU an estimate is for, as the capture describes it to the step's code: its name,
compute capability and memory (``torch.cuda.get_device_capability()``, ``is_bf16_supported()``,
``get_device_properties()``), and the cuBLAS workspace PyTorch gives it.

The table holds published compute capabilities only; the memory is the estimate's capacity
(what the allocator may use), since a name does not say which memory size of a card is meant.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# cuBLAS's workspace per (handle, stream): PyTorch's default, in
# aten/src/ATen/cuda/CublasHandlePool.cpp (parseChosenWorkspaceSize): ":4096:8" = 32 MiB on
# compute capability 9.x and newer (Hopper, Blackwell), ":4096:2:16:8" = 8 MiB + 128 KiB
# before. It is allocated through the caching allocator at a thread's first matrix multiply
# and kept; autograd's backward runs on its own thread, hence its own handle and workspace.
CUBLAS_WORKSPACE_SM90 = 4096 * 8 * 1024
CUBLAS_WORKSPACE_OLDER = 4096 * 1024 * 2 + 16 * 1024 * 8

# Name fragments (lower case, most specific first) -> (marketing name, compute capability).
_KNOWN: tuple[tuple[str, str, tuple[int, int]], ...] = (
    ("gh200", "NVIDIA GH200", (9, 0)),
    ("gb200", "NVIDIA GB200", (10, 0)),
    ("h100", "NVIDIA H100", (9, 0)),
    ("h200", "NVIDIA H200", (9, 0)),
    ("h800", "NVIDIA H800", (9, 0)),
    ("b100", "NVIDIA B100", (10, 0)),
    ("b200", "NVIDIA B200", (10, 0)),
    ("a100", "NVIDIA A100", (8, 0)),
    ("a800", "NVIDIA A800", (8, 0)),
    ("a30", "NVIDIA A30", (8, 0)),
    ("a6000", "NVIDIA RTX A6000", (8, 6)),
    ("a40", "NVIDIA A40", (8, 6)),
    ("a10", "NVIDIA A10", (8, 6)),
    ("l40", "NVIDIA L40", (8, 9)),
    ("l4", "NVIDIA L4", (8, 9)),
    ("rtx 50", "NVIDIA GeForce RTX 50", (12, 0)),
    ("rtx50", "NVIDIA GeForce RTX 50", (12, 0)),
    ("rtx 40", "NVIDIA GeForce RTX 40", (8, 9)),
    ("rtx40", "NVIDIA GeForce RTX 40", (8, 9)),
    ("rtx 30", "NVIDIA GeForce RTX 30", (8, 6)),
    ("rtx30", "NVIDIA GeForce RTX 30", (8, 6)),
    ("v100", "Tesla V100", (7, 0)),
    ("t4", "Tesla T4", (7, 5)),
    ("p100", "Tesla P100", (6, 0)),
)


@dataclass(frozen=True)
class Gpu:
    """The device the capture stands in for. ``total_memory`` is the estimate's capacity."""

    name: str
    major: int
    minor: int
    total_memory: int

    @property
    def bf16(self) -> bool:
        """bfloat16 arithmetic: compute capability 8.0 and newer (Ampere on)."""
        return self.major >= 8

    @property
    def cublas_workspace(self) -> int:
        return CUBLAS_WORKSPACE_SM90 if self.major >= 9 else CUBLAS_WORKSPACE_OLDER


def gpu_for(device: str, capacity: int) -> Gpu:
    """The GPU `device` names: "cuda", "cuda:N" (a Hopper-class GPU), a name of the table
    ("h100", "NVIDIA A100-SXM4-80GB", "rtx4090"), or "sm90"/"sm_86"; any other name is taken
    as a GPU of compute capability 8.0. Raises TypeError when `device` is not a str."""
    if not isinstance(device, str):
        raise TypeError(f"device: expected a GPU name such as \"h100\", \"a100\" or \"cuda:0\", "
                        f"got {type(device).__name__}")
    d = device.lower().strip()
    if d == "cuda" or re.fullmatch(r"cuda:\d+", d):
        return Gpu("Hopper-class GPU (memscope.estimate)", 9, 0, capacity)
    sm = re.search(r"sm_?(\d+)", d)
    if sm:
        cc = int(sm.group(1))
        return Gpu(device, cc // 10, cc % 10, capacity)
    for fragment, name, (major, minor) in _KNOWN:
        if fragment in d:
            return Gpu(name, major, minor, capacity)
    return Gpu(device, 8, 0, capacity)
