"""The GPUs an estimate can be for, and what of each card the caching allocator cannot use.

One table, read by memscope.estimate / max_batch and the `memscope estimate` command:

- a GPU's compute capability by the names users give ("h100", "a100", "sm86",
  "NVIDIA A100-SXM4-80GB"): it picks cuBLAS's workspace size and the attention kernels;
- whole cards (``capacity="h100-80gb"``, ``--device h100``): the memory CUDA reports for the
  card (``torch.cuda.get_device_properties().total_memory``, cudaMemGetInfo's total: NVML's
  total less what the driver keeps), and what a PyTorch process holds there outside the caching
  allocator: the CUDA context, and the cuBLAS and cuDNN handles (their lazily loaded kernels and
  their own buffers). What is left for the allocator is the card less those.

Each figure says where it comes from and whether this project measured it on that card: most
were read from public sources or assumed, and a measurement on a GPU is owed for them
(python/tests/test_devices.py's ``gpu`` test measures them and writes what it found).
A name the table does not know raises UnknownDeviceError listing the names it knows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ._memscope import UsageError

MiB = 1 << 20

# cuBLAS's workspace per (handle, stream): PyTorch's default, in
# aten/src/ATen/cuda/CublasHandlePool.cpp (parseChosenWorkspaceSize): ":4096:8" = 32 MiB when
# the GPU's major compute capability is 9 to 12 (Hopper, Blackwell), ":4096:2:16:8" =
# 8 MiB + 128 KiB before. It is allocated through the caching allocator at a thread's first
# matrix multiply and kept (memscope._capture counts it as a workspace).
CUBLAS_WORKSPACE_SM90 = 4096 * 8 * 1024
CUBLAS_WORKSPACE_OLDER = 4096 * 1024 * 2 + 16 * 1024 * 8


def cublas_workspace(capability: tuple[int, int]) -> int:
    """PyTorch's default cuBLAS workspace for a GPU of this compute capability."""
    return CUBLAS_WORKSPACE_SM90 if 9 <= capability[0] <= 12 else CUBLAS_WORKSPACE_OLDER


class UnknownDeviceError(UsageError, ValueError):
    """A device or card name the table does not know; the message lists the known ones."""


@dataclass(frozen=True)
class Figure:
    """One number of the table, with where it comes from. ``measured``: measured on that card
    by this project; otherwise read from a public source or assumed (the source says which),
    and a measurement is owed."""

    bytes: int
    source: str
    measured: bool = False


@dataclass(frozen=True)
class Card:
    """A whole GPU card: its memory as CUDA reports it, and what a PyTorch process holds on it
    outside the caching allocator (per handle: one per thread that uses the library)."""

    name: str
    aliases: tuple[str, ...]
    capability: tuple[int, int]
    usable: Figure  # total_memory as torch reports it (cudaMemGetInfo's total)
    context: Figure  # the CUDA context: the driver's, and PyTorch's lazily loaded kernels
    cublas_handle: Figure  # one cuBLAS (and cuBLASLt) handle, outside the allocator
    cudnn_handle: Figure  # one cuDNN handle, outside the allocator

    @property
    def cublas_workspace(self) -> int:
        """cuBLAS's workspace per thread (inside the allocator: counted by the capture)."""
        return cublas_workspace(self.capability)

    def outside(self, cublas_handles: int, cudnn_handles: int) -> int:
        """What the process holds outside the allocator with that many handles."""
        return (self.context.bytes + cublas_handles * self.cublas_handle.bytes
                + cudnn_handles * self.cudnn_handle.bytes)


# The CUDA context. Measured once on a Hopper card (the same GH100 chip, 132 SMs, in the H100
# SXM and the H200): 518 MiB of NVML's per-process memory for a process holding only a context
# (memscope's C++ empty_cache GPU test, no kernels of its own), on the H200 of the project's
# GPU run of 2026-12-04 (docs/gpu-runs/2026-12-04-later/empty_cache.json: "before").
_HOPPER_CONTEXT = 543_162_368
_HOPPER_SOURCE = ("measured: NVML per-process memory of a bare CUDA context on an H200, driver "
                  "580.159.04, CUDA 13.0 (docs/gpu-runs/2026-12-04-later/empty_cache.json); "
                  "PyTorch's own lazily loaded kernels are not in it")
_OTHER_CONTEXT = Figure(300 * MiB,
                        "not measured: \"about 300 MB\" with CUDA's lazy module loading (CUDA "
                        "11.7 and later), a PyTorch maintainer in pytorch/pytorch#107667")
# Nobody measured the handles here: assumed, to be replaced by the gpu test's figures.
_CUBLAS = Figure(64 * MiB, "not measured: assumed (cuBLAS/cuBLASLt handle and the GEMM kernels "
                           "it loads lazily); the gpu test in python/tests/test_devices.py "
                           "measures it")
_CUDNN = Figure(128 * MiB, "not measured: assumed (cuDNN handle and the convolution engines it "
                           "loads lazily); the gpu test in python/tests/test_devices.py "
                           "measures it")


def _public(mib: int, where: str) -> Figure:
    return Figure(mib * MiB, f"not measured here: total_memory={mib}MB as torch prints it, "
                             f"{where} (varies a few MiB with the driver)")


CARDS: tuple[Card, ...] = (
    Card("h100-80gb", ("h100", "h100-sxm", "nvidia h100 80gb hbm3"), (9, 0),
         _public(81_089, "a public log of torch 2.7, CUDA 12.8"),
         Figure(_HOPPER_CONTEXT, "not measured on an H100: the H200's measurement (the same "
                                 "GH100 chip)"), _CUBLAS, _CUDNN),
    Card("h200", ("h200-141gb", "nvidia h200"), (9, 0),
         Figure(150_109_880_320, "measured: CUDA's total on the H200 of the project's GPU run "
                                 "of 2026-12-04 (NVML total 150,754,820,096 less 644,939,776 "
                                 "the driver keeps; /work/shared/gpu-runs/2026-12-04)", True),
         Figure(_HOPPER_CONTEXT, _HOPPER_SOURCE, True), _CUBLAS, _CUDNN),
    Card("a100-40gb", ("a100-sxm4-40gb",), (8, 0),
         _public(40_536, "public logs of A100-SXM4-40GB"), _OTHER_CONTEXT, _CUBLAS, _CUDNN),
    Card("a10g", ("nvidia a10g",), (8, 6), _public(22_587, "a public log of an AWS A10G"),
         _OTHER_CONTEXT, _CUBLAS, _CUDNN),
    Card("l40s", ("nvidia l40s",), (8, 9), _public(45_589, "a public log of an L40S"),
         _OTHER_CONTEXT, _CUBLAS, _CUDNN),
    Card("rtx-4090", ("4090", "nvidia geforce rtx 4090"), (8, 9),
         _public(24_563, "a public log of a GeForce RTX 4090"), _OTHER_CONTEXT, _CUBLAS,
         _CUDNN),
    Card("t4", ("tesla t4",), (7, 5), _public(15_095, "a public log of a Tesla T4 (Colab)"),
         _OTHER_CONTEXT, _CUBLAS, _CUDNN),
)

# Compute capability by the names users give (NVIDIA's CUDA GPUs table), matched inside the
# name ("NVIDIA A100-SXM4-80GB" is an a100), longest first ("a100" before "a10").
_FAMILIES = (
    (("gb200", "b200", "b100"), (10, 0)), (("gh200", "h200", "h100", "h800", "h20"), (9, 0)),
    (("rtx 6000 ada", "l40", "l4", "4090", "4080", "ada"), (8, 9)),
    (("a10", "a40", "a6000", "3090", "3080"), (8, 6)), (("a100", "a800", "a30"), (8, 0)),
    (("t4", "2080", "turing"), (7, 5)), (("v100", "volta"), (7, 0)),
    (("rtx 50", "5090", "sm120"), (12, 0)), (("sm100",), (10, 0)), (("sm90",), (9, 0)),
    (("sm89",), (8, 9)), (("sm86",), (8, 6)), (("sm80",), (8, 0)),
)
_BY_LENGTH = sorted(((n, c) for names, c in _FAMILIES for n in names), key=lambda x: -len(x[0]))


def _normal(name: str) -> str:
    return " ".join(name.lower().replace("_", "-").split())


def card(name: str) -> Optional[Card]:
    """The card a name stands for (its name or an alias, any case), or None."""
    n = _normal(name)
    for c in CARDS:
        if n == c.name or n in c.aliases:
            return c
    return None


def card_names() -> str:
    """The cards, as an error message lists them."""
    return ", ".join(c.name for c in CARDS)


def _known_devices() -> str:
    return (f"\"cuda\" or \"cuda:N\" (a Hopper-class GPU), a card ({card_names()}), or a GPU "
            f"family ({', '.join(n for names, _ in _FAMILIES for n in names)})")


def capability(device: str, what: str = "device") -> tuple[int, int]:
    """The compute capability of the GPU `device` names: "cuda"/"cuda:N" a Hopper-class GPU,
    a card of the table, or a name holding a GPU family's. UnknownDeviceError otherwise."""
    n = _normal(device)
    if n == "cuda" or (n.startswith("cuda:") and n[5:].isdigit()):
        return (9, 0)
    c = card(n)
    if c is not None:
        return c.capability
    for family, cc in _BY_LENGTH:
        if family in n:
            return cc
    raise UnknownDeviceError(f"{what}: {device!r} names no GPU memscope knows; give "
                             f"{_known_devices()}")


def unknown_card(value: str, what: str) -> UnknownDeviceError:
    """The error for a capacity that is neither a size nor a card."""
    return UnknownDeviceError(f"{what}: {value!r} is neither a size with its unit (\"24GiB\", "
                              f"\"80GB\") nor a card memscope knows ({card_names()})")
