"""Scaled-dot-product attention as CUDA runs it, for the capture behind memscope.estimate.

On the CPU, ``F.scaled_dot_product_attention`` with dropout (or a mask the CPU kernel refuses)
runs the math path, which materialises the attention weights and dropout mask and saves them for
backward; on CUDA the same call runs a fused kernel that saves only the output and the
log-sum-exp. The capture therefore decides the backend as PyTorch's CUDA dispatch decides it
(``select_sdp_backend`` in aten/src/ATen/native/transformers/cuda/sdp_utils.cpp, read for
PyTorch 2.10+: priority order, ``can_use_cudnn_attention``, ``can_use_flash_attention``,
``can_use_mem_efficient_attention``) for the GPU named by the estimate's ``device=``, and runs
that backend's own op (``aten._scaled_dot_product_{flash,efficient,cudnn}_attention`` or
``_scaled_dot_product_attention_math``) on the fake tensors: their meta kernels give the
outputs and what autograd saves (output, log-sum-exp, RNG state), and the backward op's meta
kernel the gradients. What the CUDA kernels allocate beyond their outputs (the backward's fp32
accumulators, GQA's expanded key/value gradients) is added by ``backward_buffers``.

The enabled backends and the priority order are PyTorch's own global flags, so
``torch.nn.attention.sdpa_kernel`` and ``torch.backends.cuda.sdp_kernel`` contexts in the
workload are honoured.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from . import _devices

FLASH, EFFICIENT, MATH, CUDNN = "flash", "efficient", "math", "cudnn"
_BY_ENUM = {0: MATH, 1: FLASH, 2: EFFICIENT, 3: CUDNN}  # torch.nn.attention.SDPBackend values
_DEFAULT_ORDER = (FLASH, EFFICIENT, MATH, CUDNN)  # at::globalContext's default sDPPriorityOrder


@dataclass(frozen=True)
class Gpu:
    """What the attention dispatch reads from the GPU: its compute capability, and the cuDNN
    and CUDA versions of the installed PyTorch (``torch.backends.cudnn.version()``,
    ``torch.version.cuda``: a CPU build reports none, and then no cuDNN attention)."""

    name: str
    major: int
    minor: int
    cudnn: int = 0
    cuda: tuple[int, int] = (0, 0)


def gpu_for(device: str) -> Gpu:
    """The Gpu a device name stands for (memscope._devices: UnknownDeviceError for a name it does
    not know), with the installed PyTorch's cuDNN and CUDA versions."""
    import torch

    cc = _devices.capability(device)
    cudnn_version = 0
    try:
        cudnn_version = int(torch.backends.cudnn.version() or 0)  # type: ignore[no-untyped-call]
    except (RuntimeError, AttributeError):
        cudnn_version = 0
    cuda = (0, 0)
    if torch.version.cuda:
        major, _, minor = torch.version.cuda.partition(".")
        cuda = (int(major), int(minor.split(".")[0] or 0))
    return Gpu(device, cc[0], cc[1], cudnn_version, cuda)


@dataclass
class Call:
    """One attention call as the dispatch sees it (sdp_params)."""

    q: Any
    k: Any
    v: Any
    mask: Any
    dropout: float
    is_causal: bool
    enable_gqa: bool

    def requires_grad(self) -> bool:
        import torch

        return torch.is_grad_enabled() and any(
            t.requires_grad for t in (self.q, self.k, self.v))


def _prefers_cudnn(gpu: Gpu) -> bool:
    """check_prefer_cudnn_attention: cuDNN first on sm90/sm10x with cuDNN newer than 9.15
    (before CUDA 13, minor version 0 or 3 only)."""
    if gpu.cudnn <= 91500 or gpu.major not in (9, 10):
        return False
    return gpu.cuda >= (13, 0) or gpu.minor in (0, 3)


def priority_order(gpu: Gpu) -> tuple[str, ...]:
    """The order the dispatch tries backends: the user's (sdpa_kernel(..., set_priority=True)),
    else the default, which PyTorch replaces with cuDNN first where it prefers cuDNN."""
    import torch

    order = tuple(_BY_ENUM[i] for i in torch._C._get_sdp_priority_order() if i in _BY_ENUM)
    if order == _DEFAULT_ORDER and _prefers_cudnn(gpu):
        return (CUDNN, FLASH, EFFICIENT, MATH)
    return order


def _low_precision(t: Any) -> bool:
    import torch

    return t.dtype in (torch.float16, torch.bfloat16)


def _dense_common(c: Call, gqa: bool, same_heads: bool) -> bool:
    """check_tensor_shapes, check_batch_size_and_num_heads_dense<supports_gqa,
    requires_same_num_heads> and check_nonzero_sequence_lengths_dense (sdp_utils_cpp.h)."""
    q, k, v = c.q, c.k, c.v
    if not (q.dim() == k.dim() == v.dim() == 4):
        return False
    if not (q.size(0) == k.size(0) == v.size(0)):
        return False
    hq, hk, hv = q.size(1), k.size(1), v.size(1)
    if c.enable_gqa and gqa:  # check_grouped_query_attention
        if not (hk and hq % hk == 0 and hk == hv):
            return False
    elif same_heads and not (hq == hk == hv):
        return False
    return all(t.size(-2) > 0 and t.size(-1) > 0 for t in (q, k, v))


def _last_stride_one(c: Call, ignore_singleton: bool) -> bool:
    for t in (c.q, c.k, c.v):
        if t.stride(-1) != 1 and not (ignore_singleton and t.size(-1) == 1):
            return False
    return True


def _mask_shape_ok(c: Call) -> bool:
    """check_attn_mask_shape: no mask, or one that does not require grad, broadcasts to
    (batch, heads, L, S) and has 2 or 4 dimensions."""
    m = c.mask
    if m is None:
        return True
    if m.requires_grad:
        return False
    if m.size(-2) not in (c.q.size(2), 1) or m.size(-1) not in (c.k.size(2), 1):
        return False
    if m.dim() == 2:
        return True
    return m.dim() == 4 and m.size(0) in (1, c.q.size(0)) and m.size(1) in (1, c.q.size(1))


def can_use_flash(c: Call, gpu: Gpu) -> bool:
    import torch

    if not torch.backends.cuda.flash_sdp_enabled():  # type: ignore[no-untyped-call]
        return False
    if not _dense_common(c, gqa=True, same_heads=True):
        return False
    if c.mask is not None:  # check_for_attn_mask
        return False
    d_q, d_k, d_v = c.q.size(-1), c.k.size(-1), c.v.size(-1)
    if not (d_q == d_k == d_v and d_q <= 256):
        return False
    if not ((8, 0) <= (gpu.major, gpu.minor) <= (12, 1)):
        return False
    if c.requires_grad() and ((8, 6) <= (gpu.major, gpu.minor) <= (8, 9)
                              or (12, 0) <= (gpu.major, gpu.minor) <= (12, 1)):
        if not (d_q <= 192 or (c.dropout == 0.0 and d_q > 224)):
            return False
    if c.is_causal and c.q.size(-2) != c.k.size(-2):
        return False
    if not _low_precision(c.q) or len({c.q.dtype, c.k.dtype, c.v.dtype}) != 1:
        return False
    return _last_stride_one(c, ignore_singleton=True)


def _min_gemm_alignment(c: Call, gpu: Gpu) -> int:
    half = _low_precision(c.q)
    tensor_cores = gpu.major >= 8 or (gpu.major >= 7 and half)
    alignment = 4 if gpu.major >= 8 else 1
    if tensor_cores:
        alignment = max(alignment, 128 // (16 if half else 32))
    return alignment


def can_use_efficient(c: Call, gpu: Gpu) -> bool:
    import torch

    if not torch.backends.cuda.mem_efficient_sdp_enabled():  # type: ignore[no-untyped-call]
        return False
    if not ((5, 0) <= (gpu.major, gpu.minor) <= (12, 1)):
        return False
    q, k, v = c.q, c.k, c.v
    if not (q.dim() == k.dim() == v.dim() == 4):
        return False
    align = _min_gemm_alignment(c, gpu)
    d_q, d_k, d_v = q.size(-1), k.size(-1), v.size(-1)
    if not (d_q == d_k and d_q % align == 0 and d_v % align == 0 and d_q > 0 and d_v > 0):
        return False
    if gpu.major >= 8:  # check_data_ptr_alignment_mem_efficient
        bytes_ = align * q.element_size()
        if any(t.numel() and (t.storage_offset() * t.element_size()) % bytes_
               for t in (q, k, v)):
            return False
    if not _dense_common(c, gqa=True, same_heads=True):
        return False
    if not _last_stride_one(c, ignore_singleton=False):
        return False
    dtypes = ((torch.float16, torch.float32, torch.bfloat16) if gpu.major >= 8
              else (torch.float16, torch.float32))
    return q.dtype in dtypes and k.dtype == q.dtype and v.dtype == q.dtype


def can_use_cudnn(c: Call, gpu: Gpu) -> bool:
    import torch

    if gpu.cudnn < 90000:  # no cuDNN in this PyTorch, or one too old for cuDNN attention
        return False
    if c.dropout > 0.0 and 91100 < gpu.cudnn < 91400:
        return False
    if not torch.backends.cuda.cudnn_sdp_enabled():  # type: ignore[no-untyped-call]
        return False
    if c.q.dim() != 4 or c.k.dim() != 4 or c.v.dim() != 4:
        return False
    if torch.are_deterministic_algorithms_enabled() and \
            not torch.is_deterministic_algorithms_warn_only_enabled():
        return False
    if not _low_precision(c.q) or len({c.q.dtype, c.k.dtype, c.v.dtype}) != 1:
        return False
    if not _mask_shape_ok(c):
        return False
    if not ((8, 0) <= (gpu.major, gpu.minor) <= (12, 1)):
        return False
    if c.dropout * 16.0 != math.floor(c.dropout * 16.0):  # check_cudnn_dropout
        return False
    if not all(t.size(-2) > 0 and t.size(-1) > 0 for t in (c.q, c.k, c.v)):
        return False
    if not _last_stride_one(c, ignore_singleton=True):
        return False
    if not _dense_common(c, gqa=True, same_heads=False):
        return False
    return _cudnn_shapes_ok(c, gpu)


def _cudnn_shapes_ok(c: Call, gpu: Gpu) -> bool:
    """check_cudnn_tensor_shapes and check_cudnn_d256_bprop_head_dim (PyTorch's cuDNN frontend
    supports head dim 256: kCuDNNFrontendSupportsD256 assumed)."""
    b, h, s_q, d_qk = (c.q.size(i) for i in range(4))
    s_k, d_v = c.k.size(2), c.v.size(3)
    if b > 65535 or h > 65535:
        return False
    sm90_or_10x = (gpu.major == 9 and gpu.minor == 0) or gpu.major == 10
    unsupported_sm107 = gpu.major == 10 and gpu.minor == 7 and gpu.cudnn <= 92500
    limit = 128
    if sm90_or_10x and not unsupported_sm107 and gpu.cudnn > 92200:
        limit = 256
    elif sm90_or_10x and gpu.cudnn >= 91100 and d_qk == 192 and d_v == 128:
        limit = 192
    if d_qk > limit or d_v > limit or d_qk % 8 or d_v % 8:
        return False
    if s_k == 1 or (c.dropout != 0.0 and s_q == 1):
        return False
    if c.requires_grad() and limit == 256:
        if not ((d_qk <= 128 and d_v <= 128) or (d_qk == 192 and d_v == 128)
                or (d_qk == 256 and d_v == 256)):
            return False
    return True


def choose_backend(c: Call, gpu: Gpu) -> str:
    """select_sdp_backend: the first backend of the priority order that can run the call."""
    import torch

    math_enabled = torch.backends.cuda.math_sdp_enabled()  # type: ignore[no-untyped-call]
    for backend in priority_order(gpu):
        if backend == CUDNN and can_use_cudnn(c, gpu):
            return CUDNN
        if backend == FLASH and can_use_flash(c, gpu):
            return FLASH
        if backend == EFFICIENT and can_use_efficient(c, gpu):
            return EFFICIENT
        if backend == MATH and math_enabled:
            return MATH
    raise RuntimeError("No available kernel for scaled_dot_product_attention: every backend "
                       "that could run it is disabled (sdpa_kernel / torch.backends.cuda)")


_SDPA_PARAMS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal")


def parse_call(args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[Call, Optional[float]]:
    """F.scaled_dot_product_attention's arguments as a Call, and its `scale`."""
    bound = dict(zip(_SDPA_PARAMS, args, strict=False))
    bound.update(kwargs)
    call = Call(bound["query"], bound["key"], bound["value"], bound.get("attn_mask"),
                float(bound.get("dropout_p", 0.0) or 0.0), bool(bound.get("is_causal", False)),
                bool(bound.get("enable_gqa", False)))
    return call, bound.get("scale")


def _bool_mask_to_float(mask: Any, dtype: Any) -> Any:
    """convert_boolean_attn_mask: where(~mask, -inf, 0) in the query's dtype."""
    import torch

    if mask is None or mask.dtype != torch.bool:
        return mask
    return torch.where(mask.logical_not(), torch.tensor(-math.inf, dtype=dtype),
                       torch.tensor(0.0, dtype=dtype))


def _efficient_mask(mask: Any, c: Call) -> Any:
    """preprocess_mask (attention.cpp): expanded to (batch, heads, L, S); a last dimension not
    a multiple of 16 is padded (a new, full-size tensor), unaligned strides made contiguous."""
    import torch

    m = mask.expand(c.q.size(0), c.q.size(1), c.q.size(2), c.k.size(2))
    s = m.size(-1)
    if s % 16:
        padded = torch.nn.functional.pad(m, (0, 16 - s % 16))
        return padded[..., :s]
    if any(m.stride(i) % 16 for i in range(3)):
        return m.contiguous()
    return m


def run(c: Call, scale: Optional[float], backend: str) -> Any:
    """The backend's op on the call's (fake) tensors, as attention.cpp's
    scaled_dot_product_attention calls it; returns the attention output."""
    import torch

    aten = torch.ops.aten
    q, k, v = c.q, c.k, c.v
    if backend == FLASH:
        d = q.size(-1)
        if d % 8:  # pad_last_dim<8>: copies of q, k, v with the head dim padded
            pad = 8 - d % 8
            q, k, v = (torch.nn.functional.pad(t, (0, pad)) for t in (q, k, v))
        s = scale if scale is not None else 1.0 / math.sqrt(d)
        out = aten._scaled_dot_product_flash_attention(q, k, v, c.dropout, c.is_causal, False,
                                                       scale=s)[0]
        return out[..., :d] if d % 8 else out
    mask = _bool_mask_to_float(c.mask, q.dtype)
    if backend == EFFICIENT:
        if mask is not None:
            mask = _efficient_mask(mask, c)
        return aten._scaled_dot_product_efficient_attention(
            q, k, v, mask, c.requires_grad(), c.dropout, c.is_causal, scale=scale)[0]
    if backend == CUDNN:
        return aten._scaled_dot_product_cudnn_attention(
            q, k, v, mask, c.requires_grad(), c.dropout, c.is_causal, False, scale=scale)[0]
    return aten._scaled_dot_product_attention_math(
        q, k, v, mask, c.dropout, c.is_causal, None, scale=scale, enable_gqa=c.enable_gqa)[0]


# Outputs of the fused forward ops that CUDA keeps on the host, by op: the memory-efficient
# kernel's philox seed and offset (CPU scalars outside CUDA graph capture), and flash's and
# cuDNN's RNG state when there is no dropout.
def host_outputs(op: str, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[int, ...]:
    if op == "_scaled_dot_product_efficient_attention":
        return (2, 3)
    if op in ("_scaled_dot_product_flash_attention", "_scaled_dot_product_cudnn_attention"):
        # The dispatcher drops trailing arguments left at their default (dropout_p=0.0).
        at = 3 if op.endswith("flash_attention") else 5
        dropout = args[at] if len(args) > at else kwargs.get("dropout_p", 0.0)
        if not dropout:
            return (6, 7)
    return ()


def _round(n: int, m: int) -> int:
    return (n + m - 1) // m * m


def backward_buffers(op: str, args: Sequence[Any]) -> list[int]:
    """Bytes of what a fused attention backward allocates on CUDA besides the gradients it
    returns, freed when it returns.

    - flash (flash_api.cpp, mha_bwd): softmax_d (batch, heads, seq_q rounded up to 128) and
      dq_accum (batch, seq_q rounded to 128, heads, head dim rounded to 32, or 64 above 128),
      fp32; with fewer key/value heads than query heads (GQA), dk and dv at the query's head
      count (batch, seq_k, heads, head dim) before they are summed.
    - memory-efficient (attention_backward.cu, kernel_backward.h): delta (batch, heads, seq_q)
      fp32, and for fp16/bf16 the fp32 gradient-of-query accumulator (batch, heads, seq_q
      rounded to 64, head dim rounded to 64), the kernel's workspace without key splits; GQA's
      expanded dk, dv as for flash.
    - cuDNN (the cuDNN frontend's SDPA backward graph): its workspace, taken here as flash's
      dq_accum and softmax_d (the graph's size is chosen on the GPU: unmeasured).
    """
    import torch

    q = args[1] if len(args) > 1 else None
    k = args[2] if len(args) > 2 else None
    if not isinstance(q, torch.Tensor) or not isinstance(k, torch.Tensor) or q.dim() != 4:
        return []
    b, h, lq, d = (int(x) for x in q.shape)
    hk, lk = int(k.shape[1]), int(k.shape[2])
    gqa = [b * lk * h * d * q.element_size()] * 2 if hk != h else []
    if op == "_scaled_dot_product_flash_attention_backward" or \
            op == "_scaled_dot_product_cudnn_attention_backward":
        lq_r = _round(lq, 128)
        d_r = _round(d, 32) if d <= 128 else _round(d, 64)
        return [b * h * lq_r * 4, b * lq_r * h * d_r * 4, *gqa]
    if op == "_scaled_dot_product_efficient_attention_backward":
        out = [b * h * lq * 4]
        if q.dtype != torch.float32:
            out.append(b * h * _round(lq, 64) * _round(d, 64) * 4)
        return out + gqa
    return []


FUSED_BACKWARD = frozenset((
    "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_efficient_attention_backward",
    "_scaled_dot_product_cudnn_attention_backward",
))
