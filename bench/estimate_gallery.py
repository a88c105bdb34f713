"""memscope.estimate over the Hugging Face gallery (docs/estimate.md's table): each architecture
from its transformers config's defaults (full size, random weights, nothing downloaded), in
fp32 and bf16 autocast, with and without gradient checkpointing, AdamW, one estimate each on an
H200-class GPU. Prints one Markdown row per run: what was captured (ops, attention backends),
peak allocated and reserved, and the time the estimate took on this machine.

    python3 bench/estimate_gallery.py [--seq 512] [--batch 8] [--tiny] [--only GPT-2,BERT]

--tiny uses the tests' tiny configs (seconds each). Needs torch and transformers.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--device", default="h200")
    p.add_argument("--tiny", action="store_true", help="the tests' tiny configs")
    p.add_argument("--only", default="", help="comma-separated gallery names (prefixes)")
    p.add_argument("--layers", type=int, default=0,
                   help="override the number of layers (0: the config's default)")
    a = p.parse_args()
    warnings.filterwarnings("ignore")
    import transformers

    import memscope
    from memscope import _hf_workloads as hf

    transformers.logging.set_verbosity_error()
    only = [x.strip() for x in a.only.split(",") if x.strip()]
    print("| model | config | fp32 / bf16 | checkpointing | ops | attention | peak allocated "
          "| peak reserved | estimate time |")
    print("|---|---|---|---|---:|---|---:|---:|---:|")
    failures = 0
    for name, (model_type, tiny) in hf.GALLERY.items():
        if only and not any(name.startswith(o) for o in only):
            continue
        overrides = dict(tiny) if a.tiny else {}
        config = hf.load_config(model_type, **overrides)
        if a.layers:
            for key in ("num_hidden_layers", "n_layer", "num_layers", "num_decoder_layers"):
                if hasattr(config, key):
                    setattr(config, key, a.layers)
        params = 0
        if not a.tiny:  # counted on the meta device: a 7B model would not fit in host memory
            import torch

            with torch.device("meta"):
                params = hf.build_model(config).num_parameters()
        size = f"{params / 1e6:,.0f}M params" if params else "tiny"
        for bf16 in (False, True):
            for ckpt in (False, True):
                how = hf.Training(bf16=bf16, gradient_checkpointing=ckpt)
                work = hf.hf_workload(config, seq=a.seq, how=how)
                t0 = time.perf_counter()
                try:
                    e = memscope.estimate(work, batch=a.batch, steps=2, device=a.device,
                                          capacity="1TiB")
                except memscope.CaptureError as err:
                    failures += 1
                    print(f"| {name} | {size} | {'bf16' if bf16 else 'fp32'} | "
                          f"{'yes' if ckpt else 'no'} | CaptureError: {err} | | | | |")
                    continue
                dt = time.perf_counter() - t0
                att = ", ".join(f"{n} {b}" for b, n in sorted(e.attention.items()))
                print(f"| {name} | {size} | {'bf16' if bf16 else 'fp32'} | "
                      f"{'yes' if ckpt else 'no'} | {e.ops:,} | {att} | "
                      f"{memscope.format_bytes(e.peak_allocated)} | "
                      f"{memscope.format_bytes(e.peak_reserved)} | {dt:.1f} s |", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
