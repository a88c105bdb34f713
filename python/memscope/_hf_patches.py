"""What the capture changes in transformers while it runs (only when transformers is imported).

transformers reads tensor values to choose a path, and on fake tensors (which it treats as
tracing) takes the path that works without them, which is not the one a GPU run takes:

- ``find_packed_sequence_indices(position_ids)`` returns a packed-sequence mask when it cannot
  read the position ids, and the attention then gets an explicit mask (no ``is_causal``, so no
  flash attention; the mask converted and saved by every layer). On the GPU, position ids that
  count 0, 1, 2... are not packed and give None. The capture answers None: position ids the
  step makes itself are never packed (a step that packs sequences must say so with a mask).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ._capture_scope import replaced


@contextmanager
def patched_transformers() -> Iterator[None]:
    masking = sys.modules.get("transformers.masking_utils")
    original = getattr(masking, "find_packed_sequence_indices", None)
    if masking is None or original is None:
        yield
        return

    def not_packed(position_ids: Any) -> Any:
        from torch._subclasses.fake_tensor import FakeTensor

        if isinstance(position_ids, FakeTensor):
            return None
        return original(position_ids)

    # For the capturing thread alone, as every patch of the capture (memscope._capture_scope).
    with replaced(masking, "find_packed_sequence_indices", not_packed):
        yield
