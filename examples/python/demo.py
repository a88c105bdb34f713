#!/usr/bin/env python3
"""memscope from Python: the same tour as the C++ demo (make demo).

1. The scenario users know from torch.cuda.empty_cache(): device memory as the driver (or, on
   the host, the kernel) sees it before, after a big buffer, after swapping it for a small one,
   and after empty_cache().
2. A training-like run in init / train / eval (nested inside train) / test stages, ending with
   the aligned metrics table and the JSON files it wrote.

Runs on the first GPU when there is one, else on host memory. Usage:
    PYTHONPATH=build/python python3 examples/python/demo.py [output_dir]
"""

from __future__ import annotations

import sys
import tempfile

import numpy as np

import memscope

MiB = 1 << 20


def used(device: str) -> str:
    if device == "host":
        return memscope.format_bytes(memscope.host.rss()) + " RSS"
    return memscope.format_bytes(memscope.device_memory_used(device)) + " used on the device"


def empty_cache_scenario(device: str, big_bytes: int) -> None:
    print(f"== empty_cache on {device} ==")
    print(f"  before:            {used(device)}")
    big = memscope.buffer(big_bytes, device)
    if big.kind == "host":
        np.asarray(big)[:] = 1
    print(f"  big buffer:        {used(device)}   "
          f"(reserved {memscope.format_bytes(memscope.memory_reserved(device))})")
    big.free()
    small = memscope.buffer(MiB, device)
    print(f"  small buffer:      {used(device)}   (the big one is cached, not returned)")
    released = memscope.empty_cache(device)
    print(f"  after empty_cache: {used(device)}   (released {memscope.format_bytes(released)})")
    small.free()


def training_run(device: str, output_dir: str) -> None:
    tracker = memscope.Tracker()  # numbers only; how each source measures is printed once, here
    print(f"== stages ({tracker.describe_sources()}) ==")
    if device == "host":
        print("  (on the host, memory the allocator caches stays resident and counts as cpu)")
    weights = memscope.buffer(64 * MiB, device)  # before the first stage: reported as init
    with tracker.stage("train"):
        for _ in range(3):
            activations = memscope.buffer(128 * MiB, device)
            scratch = np.ones(32 * MiB, dtype=np.uint8)  # host memory: the cpu columns
            del activations, scratch
        with tracker.stage("eval"):  # nested inside train: both stay exact
            with memscope.peak_scope(device) as scope:
                batch = memscope.buffer(256 * MiB, device)
                batch.free()
            print(f"  eval peak scope: {memscope.format_bytes(scope.peak.allocated_bytes)}")
    with tracker.stage("test"):
        memscope.buffer(16 * MiB, device).free()
    metrics = tracker.metrics
    memscope.log_metrics("all", metrics)
    tracker.save_metrics("all", output_dir)
    print(f"  wrote {output_dir}/all_results.json")
    weights.free()


def main() -> None:
    device = "cuda:0" if memscope.cuda_is_available() else "host"
    output_dir = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="memscope-demo-")
    memscope.set_device(device)
    empty_cache_scenario(device, (1536 if device != "host" else 256) * MiB)
    training_run(device, output_dir)
    print(memscope.memory_summary(device).splitlines()[1])


if __name__ == "__main__":
    main()
