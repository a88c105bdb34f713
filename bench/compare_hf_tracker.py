#!/usr/bin/env python3
"""The same small CPU training run three ways: with the Hugging Face Trainer's own memory
metrics (skip_memory_metrics=False), with memscope's (memscope.hf.MemoryMetricsCallback), and
with none. Reports wall time and CPU time of train()+evaluate() as ratios to "none", and the
memory metrics both trackers report.

Optional (not part of `make test`): needs torch and transformers, e.g. in a throwaway venv:
    python3 -m venv /tmp/venv-hf && /tmp/venv-hf/bin/pip install torch transformers psutil
    PYTHONPATH=build/python /tmp/venv-hf/bin/python bench/compare_hf_tracker.py [--out FILE]

Each run is a fresh process (imports and memory state do not leak between configurations),
configurations are interleaved across repeats, and the median of the repeats is reported.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

CONFIGS = ("none", "trainer", "memscope")
KEYS = ("train_mem_cpu_alloc_delta", "train_mem_cpu_peaked_delta", "eval_mem_cpu_alloc_delta",
        "eval_mem_cpu_peaked_delta")


def child(config: str, steps: int, out_dir: str) -> dict:
    import torch
    import transformers

    torch.manual_seed(0)
    torch.set_num_threads(1)  # one core computes, leaving the other to any tracker thread

    class MLP(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(),
                                           torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                                           torch.nn.Linear(1024, 10))

        def forward(self, x, labels=None):
            logits = self.net(x)
            return {"loss": torch.nn.functional.cross_entropy(logits, labels), "logits": logits}

    class Data(torch.utils.data.Dataset):
        def __init__(self, n: int) -> None:
            self.x, self.y = torch.randn(n, 256), torch.randint(0, 10, (n,))

        def __len__(self) -> int:
            return len(self.x)

        def __getitem__(self, i):
            return {"x": self.x[i], "labels": self.y[i]}

    args = transformers.TrainingArguments(
        output_dir=out_dir, max_steps=steps, per_device_train_batch_size=32,
        per_device_eval_batch_size=64, eval_strategy="no", logging_strategy="no",
        save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True,
        skip_memory_metrics=config != "trainer")
    trainer = transformers.Trainer(model=MLP(), args=args, train_dataset=Data(32 * steps),
                                   eval_dataset=Data(4096))
    if config == "memscope":
        import memscope.hf

        memscope.hf.MemoryMetricsCallback(log=False).attach(trainer)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    metrics = dict(trainer.train().metrics)
    metrics.update(trainer.evaluate())
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return {"wall_s": wall, "cpu_s": cpu, "metrics": {k: metrics.get(k) for k in KEYS}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument("--child", choices=CONFIGS, help=argparse.SUPPRESS)
    parser.add_argument("--child-dir", help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.steps, a.child_dir)))
        return

    import tempfile

    runs: dict[str, list[dict]] = {c: [] for c in CONFIGS}
    for r in range(a.repeats):
        order = CONFIGS[r % 3:] + CONFIGS[:r % 3]  # rotate so no config always runs first
        for config in order:
            with tempfile.TemporaryDirectory() as d:
                out = subprocess.run([sys.executable, __file__, "--child", config, "--steps",
                                      str(a.steps), "--child-dir", d],
                                     capture_output=True, text=True, check=True).stdout
            runs[config].append(json.loads(out.strip().splitlines()[-1]))
            print(f"  run {r + 1}/{a.repeats} {config:9s} wall {runs[config][-1]['wall_s']:.3f} s"
                  f"  cpu {runs[config][-1]['cpu_s']:.3f} s", file=sys.stderr)

    med = {c: {k: statistics.median(x[k] for x in runs[c]) for k in ("wall_s", "cpu_s")}
           for c in CONFIGS}
    print("| tracker | wall time (s) | wall / none | CPU time (s) | CPU / none |")
    print("|---|---:|---:|---:|---:|")
    for c in CONFIGS:
        print(f"| {c} | {med[c]['wall_s']:.3f} | {med[c]['wall_s'] / med['none']['wall_s']:.3f} "
              f"| {med[c]['cpu_s']:.3f} | {med[c]['cpu_s'] / med['none']['cpu_s']:.3f} |")
    print()
    print("| metric (MiB, last run) | Trainer | memscope |")
    print("|---|---:|---:|")
    for k in KEYS:
        t, m = runs["trainer"][-1]["metrics"][k], runs["memscope"][-1]["metrics"][k]
        fmt = lambda v: "—" if v is None else f"{v / 2**20:.2f}"  # noqa: E731
        print(f"| {k} | {fmt(t)} | {fmt(m)} |")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"steps": a.steps, "repeats": a.repeats, "median": med, "runs": runs}, f,
                      indent=2)


if __name__ == "__main__":
    main()
