"""cuDNN's convolution workspaces, as PyTorch's cuDNN path asks the caching allocator for them.

How PyTorch does it (aten/src/ATen/native/cudnn/Conv_v8.cpp, the default path, read for
PyTorch 2.10+): every cuDNN convolution call (forward; in the backward, one call for the
input's gradient and one for the weight's) runs ``run_conv_plan``, which allocates the chosen
plan's workspace (``plan.getWorkspaceSize()``) from the caching allocator after the call's
output exists, and frees it when the call returns. The plan is the first engine config of
cuDNN's heuristics (``CUDNN_HEUR_MODE_INSTANT``; engines that down-convert inputs are filtered,
and fp32 without TF32 keeps no tensor-core engine) that builds and runs; an out-of-memory
error moves on to the next config. With ``torch.backends.cudnn.benchmark = True`` it first
allocates the largest workspace among the plans that fit the allocator's largest cached block,
times the plans, frees it and empties the cache.

What is modelled: the when (one transient request per call, after its outputs, freed at its
end) exactly. The size is a stand-in: cuDNN's heuristics choose an engine from the GPU, the
cuDNN version and the shapes, and their workspace cannot be asked of cuDNN without a GPU. The
stand-in is the larger of the tensors the call reads and writes (its input or output
activation; the weight aside): engines that tile or transform the data (FFT, Winograd, split-K
partial sums) need buffers of that order, implicit-GEMM engines need none. On the public trace
of a conv net recorded on a GPU (octree-nca2d, /work/shared/traces) the workspaces ranged from
none (the largest convolutions) to 1.4 times the output (128 MiB for an 89 MiB output): the
stand-in is right in magnitude, not per call. Depthwise convolutions (groups equal to the
input channels) run PyTorch's own kernels in fp32 and are given none; benchmark mode's probe
and its empty_cache are not modelled.
"""

from __future__ import annotations

from typing import Any

FORWARD, BACKWARD = "convolution", "convolution_backward"
OPS = frozenset((FORWARD, BACKWARD))


def _bytes(t: Any) -> int:
    return int(t.numel()) * int(t.element_size())


def _depthwise(input_: Any, groups: int) -> bool:
    return groups > 1 and input_.dim() >= 3 and int(input_.shape[1]) == groups


def enabled() -> bool:
    """Whether PyTorch would send convolutions to cuDNN (torch.backends.cudnn.enabled)."""
    import torch

    return bool(torch.backends.cudnn.enabled)


def workspaces(name: str, args: Any, kwargs: dict[str, Any], out: Any) -> list[int]:
    """The workspace sizes the cuDNN calls of one convolution op request, in order (each freed
    before the next is asked for): one for a forward, one per gradient a backward computes."""
    if name == FORWARD:
        input_, groups = args[0], int(kwargs.get("groups", args[8] if len(args) > 8 else 1))
        if _depthwise(input_, groups):
            return []
        return [max(_bytes(input_), _bytes(out))]
    grad_output, input_ = args[0], args[1]
    groups = int(kwargs.get("groups", args[9] if len(args) > 9 else 1))
    mask = kwargs.get("output_mask", args[10] if len(args) > 10 else (True, True, True))
    if _depthwise(input_, groups):
        return []
    sizes = []
    if mask[0]:  # the input's gradient: reads grad_output, writes grad_input
        sizes.append(max(_bytes(grad_output), _bytes(input_)))
    if mask[1]:  # the weight's gradient: reads the input and grad_output
        sizes.append(max(_bytes(grad_output), _bytes(input_)))
    return sizes
