"""What memscope.torch.watch costs before an out-of-memory error: Allocator.alloc + free pairs
(4 KiB, cache hits on a simulated device) recording with Python frames, as watch() records,
without and with watch()'s observer attached, measured alternately in one run, best of several
rounds. The observer is called only at an OOM, so the two should not differ beyond noise.
(With PyTorch's allocator, watch() costs what torch.cuda.memory._record_memory_history costs:
PyTorch's recorder, not ours.)

    PYTHONPATH=<build>/python python3 bench/oom_watch_cost.py

Results: docs/oom.md, "What it costs".
"""

from __future__ import annotations

import tempfile
import timeit

import memscope
import memscope.torch

PAIRS = 20000
ROUNDS = 9


def allocator(watched: bool, folder: str) -> memscope.Allocator:
    a = memscope.Allocator("sim:8GiB", config="")
    if watched:
        memscope.torch.watch(folder, allocator=a)  # records with Python frames, as below
    else:
        a.start_recording(max_entries=100_000, stacks="python")
    for _ in range(34000):  # fill the ring first: the timed pairs overwrite
        a.free(a.alloc(4096))
    return a


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        plain, watched = allocator(False, folder), allocator(True, folder)
        best = {"recording": float("inf"), "recording + watch": float("inf")}
        for _ in range(ROUNDS):
            for name, a in (("recording", plain), ("recording + watch", watched)):
                t = timeit.timeit(lambda a=a: a.free(a.alloc(4096)), number=PAIRS)
                best[name] = min(best[name], t / PAIRS * 1e9)
        for name, ns in best.items():
            print(f"{name:<20} {ns:8.0f} ns per alloc+free pair (best of {ROUNDS} x {PAIRS})")
        print(f"{'difference':<20} {best['recording + watch'] - best['recording']:+8.0f} ns")


if __name__ == "__main__":
    main()
