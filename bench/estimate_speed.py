"""How long memscope.estimate and max_batch take on Hugging Face GPT-2 124M (transformers'
GPT2Config defaults, random weights) at context 512, fp32, AdamW: the goals are an estimate
under 10 s and max_batch under 30 s on a 2-core machine (issue 45). A benchmark, not a test:
it prints the wall and CPU times.

    python3 bench/estimate_speed.py [--batch 8] [--capacity 24GiB] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--capacity", default="24GiB")
    p.add_argument("--device", default="h200")
    p.add_argument("--repeat", type=int, default=1)
    a = p.parse_args()
    warnings.filterwarnings("ignore")
    t_import = time.perf_counter()
    import transformers

    import memscope
    from memscope import _hf_workloads as hf

    transformers.logging.set_verbosity_error()
    import_s = time.perf_counter() - t_import
    work = hf.hf_workload("gpt2", seq=a.seq)
    for _ in range(a.repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        e = memscope.estimate(work, batch=a.batch, steps=3, device=a.device,
                              capacity=a.capacity)
        w1, c1 = time.perf_counter(), time.process_time()
        s = memscope.max_batch(work, capacity=a.capacity, steps=3, device=a.device)
        w2, c2 = time.perf_counter(), time.process_time()
        print(json.dumps({
            "model": "gpt2 (124M)", "seq": a.seq, "batch": a.batch,
            "import_s": round(import_s, 2),
            "estimate_wall_s": round(w1 - w0, 2), "estimate_cpu_s": round(c1 - c0, 2),
            "capture_s": round(e.capture_seconds, 2), "replay_s": round(e.replay_seconds, 2),
            "ops": e.ops, "peak_allocated": e.peak_allocated,
            "max_batch": s.batch, "max_batch_wall_s": round(w2 - w1, 2),
            "max_batch_cpu_s": round(c2 - c1, 2), "captures": len(s.tried),
            "scaled_replays": len(s.predicted)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
