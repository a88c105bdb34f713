"""What the capture changes in transformers while it runs (only when transformers is imported).

transformers reads tensor values to choose a path, and on fake tensors (which it treats as
tracing) takes the path that works without them, which is not the one a GPU run takes:

- ``find_packed_sequence_indices(position_ids)`` returns a packed-sequence mask when it cannot
  read the position ids, and the attention then gets an explicit mask (no ``is_causal``, so no
  flash attention; the mask converted and saved by every layer). On the GPU, position ids that
  count 0, 1, 2... are not packed and give None. The capture answers None: position ids the
  step makes itself are never packed (a step that packs sequences must say so with a mask).

And what it cannot load without a GPU:

- ``attn_implementation="flash_attention_2"`` needs the flash-attn package and a GPU to build
  the model. The capture lets the model build and runs its attention as the flash-attn kernel
  would allocate: inputs cast to the half-precision dtype transformers casts them to, then
  PyTorch's flash-attention op (the same FlashAttention-2 kernel family: output, log-sum-exp,
  RNG state, and the backward buffers memscope._attention adds). Padded batches (the varlen
  path, which unpads by the mask's values) cannot be captured.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ._capture_scope import in_capture, replaced


@contextmanager
def patched_transformers(on_attention: Callable[[str], None]) -> Iterator[None]:
    """The patches above while the capture runs; `on_attention(backend)` counts the
    flash_attention_2 calls."""
    if "transformers" not in sys.modules:  # a workload that uses it has imported it
        yield
        return
    # transformers imports its submodules lazily: the model may not be built yet.
    try:
        masking = importlib.import_module("transformers.masking_utils")
        importlib.import_module("transformers.modeling_utils")
    except ImportError:
        yield
        return
    original = getattr(masking, "find_packed_sequence_indices", None)
    if original is None:
        with _flash_attention_2(on_attention):
            yield
        return

    def not_packed(position_ids: Any) -> Any:
        from torch._subclasses.fake_tensor import FakeTensor

        if isinstance(position_ids, FakeTensor):
            return None
        return original(position_ids)

    # For the capturing thread alone, as every patch of the capture (memscope._capture_scope).
    with replaced(masking, "find_packed_sequence_indices", not_packed), \
            _flash_attention_2(on_attention):
        yield


@contextmanager
def _flash_attention_2(on_attention: Callable[[str], None]) -> Iterator[None]:
    modeling = sys.modules.get("transformers.modeling_utils")
    model_cls = getattr(modeling, "PreTrainedModel", None)
    interface = getattr(modeling, "AttentionInterface", None)
    mapping = getattr(interface, "_global_mapping", None)
    check = getattr(model_cls, "_check_and_adjust_attn_implementation", None)
    if model_cls is None or not isinstance(mapping, dict) or check is None:
        yield
        return

    def adjust(self: Any, attn_implementation: Any, *args: Any, **kwargs: Any) -> Any:
        # What transformers answers where flash-attn is installed and a GPU is there.
        if attn_implementation == "flash_attention_2" and getattr(self, "_supports_flash_attn",
                                                                   False):
            return attn_implementation
        return check(self, attn_implementation, *args, **kwargs)

    def forward(module: Any, query: Any, key: Any, value: Any, attention_mask: Any,
                dropout: float = 0.0, scaling: Any = None, sliding_window: Any = None,
                softcap: Any = None, is_causal: Any = None, **kwargs: Any) -> Any:
        import torch

        from ._capture import CaptureError

        if attention_mask is not None:
            raise CaptureError("memscope.estimate: flash_attention_2 with a padding mask runs "
                               "flash-attn's varlen path, which unpads by the mask's values; "
                               "capture it with attn_implementation=\"sdpa\" or no mask")
        dtype = query.dtype
        if dtype == torch.float32:
            dtype = (torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu")
                     else next(m for m in module.modules()
                               if isinstance(m, torch.nn.Linear)).weight.dtype)
        if dtype not in (torch.float16, torch.bfloat16):
            raise CaptureError("memscope.estimate: flash_attention_2 runs in fp16 or bf16 "
                               "only (autocast, or a model in half precision); on the GPU "
                               "flash-attn refuses fp32")
        q, k, v = (t.to(dtype) if t.dtype != dtype else t for t in (query, key, value))
        causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", True))
        on_attention("flash (flash_attention_2)")
        with torch.autocast("cpu", enabled=False):
            out = torch.ops.aten._scaled_dot_product_flash_attention(
                q, k, v, float(dropout), causal and q.size(2) > 1, False, scale=scaling)[0]
        return out.transpose(1, 2), None

    saved = mapping.get("flash_attention_2")

    def scoped_forward(*args: Any, **kwargs: Any) -> Any:
        if in_capture() or saved is None:
            return forward(*args, **kwargs)
        return saved(*args, **kwargs)

    mapping["flash_attention_2"] = scoped_forward
    try:
        with replaced(model_cls, "_check_and_adjust_attn_implementation", adjust):
            yield
    finally:
        if saved is None:
            mapping.pop("flash_attention_2", None)
        else:
            mapping["flash_attention_2"] = saved
