"""What cuDNN's convolution workspaces do to the reserved peak (docs/estimate.md, "Reserved as
the GPU reserves it"), in two figures:

1. the real GPU trace of a conv net in the corpus (octree-nca2d WSI inference: its cuDNN v8
   `run_conv_plan` allocations are the workspaces) replayed through memscope's allocator rules
   with and without those allocations: how much of its reserved they make;
2. memscope.estimate of bench/estimate_accuracy.py's conv net (batch 64, AdamW) on an H200,
   with the workspaces modelled and with cuDNN off (no workspace): before and after.

    python3 bench/conv_workspace_reserved.py [--traces DIR] [--batch 64]
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
from typing import Any

GiB = float(1 << 30)


class _NoCode(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused: {module}.{name}")


def _is_workspace(e: dict[str, Any]) -> bool:
    return any("run_conv_plan" in (f.get("name") or "") for f in e.get("frames", []))


def trace_with_and_without(path: str) -> tuple[float, float, float]:
    """(peak allocated, reserved with the workspaces, reserved without), in GiB: the trace's
    allocs and frees in order (a free of memory live before the trace began is skipped)."""
    import memscope

    with open(path, "rb") as f:
        d = _NoCode(f).load()
    events = [e for e in d["device_traces"][0] if e["action"] in ("alloc", "free_completed")]
    out = []
    for skip in (False, True):
        live: set[int] = set()
        ev = []
        for e in events:
            if e["action"] == "alloc":
                if skip and _is_workspace(e):
                    continue
                live.add(e["addr"])
                ev.append(("alloc", e["addr"], e["size"], 0, 0))
            elif e["addr"] in live:
                live.discard(e["addr"])
                ev.append(("free_completed", e["addr"], e["size"], 0, 0))
        r = memscope.Trace.from_events(ev, [], []).replay(capacity=1 << 50, top_sites=0)
        out.append(r)
    return out[0].peak_allocated / GiB, out[0].peak_reserved / GiB, out[1].peak_reserved / GiB


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--traces", default=os.environ.get("MEMSCOPE_TRACES", "../shared/traces"))
    p.add_argument("--batch", type=int, default=64)
    a = p.parse_args()
    path = os.path.join(a.traces, "torch_snapshot_octree-nca2d_wsi_inference.pickle")
    if os.path.exists(path):
        alloc, with_ws, without = trace_with_and_without(path)
        print(f"octree-nca2d (real trace): peak allocated {alloc:.2f} GiB, reserved with its "
              f"cuDNN workspaces {with_ws:.2f} GiB, without {without:.2f} GiB")
    else:
        print(f"{path}: not there; the trace figure is skipped")
    import torch

    import memscope

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from estimate_accuracy import convnet

    after = memscope.estimate(convnet, batch=a.batch, steps=3, device="h200",
                              capacity="140GiB")
    with torch.backends.cudnn.flags(enabled=False):
        before = memscope.estimate(convnet, batch=a.batch, steps=3, device="h200",
                                   capacity="140GiB")
    for what, e in (("without workspaces (before)", before), ("with them (after)", after)):
        print(f"conv net batch {a.batch}, {what}: peak allocated {e.peak_allocated / GiB:.2f} "
              f"GiB, peak reserved {e.peak_reserved / GiB:.2f} GiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
