"""What recording costs from Python: Allocator.alloc + free pairs (4 KiB, cache hits on a
simulated device) with recording off, on without stacks, with Python frames and with Python and
C++ frames, measured alternately in one run, best of several rounds. Stacks are taken on the
alloc only, so "per stack" = pair with stacks - pair without.

    PYTHONPATH=<build>/python python3 bench/recording_python.py [depth]

depth: Python frames above the allocation (default 10). Timings on a busy machine wander, so
there is also a mode for counting instructions: run one mode for n pairs, under callgrind, for
two n, and divide the difference by the difference in pairs:

    valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%p python3 \
        bench/recording_python.py --count <off|none|python|cpp|all> <pairs> [depth]

Results: docs/benchmarks.md, "Recording".
"""

from __future__ import annotations

import sys
import timeit

import memscope

PAIRS = 20000
ROUNDS = 7


def at_depth(depth: int, fn):  # type: ignore[no-untyped-def]
    if depth <= 1:
        return fn()
    return at_depth(depth - 1, fn)


def count(mode: str, pairs: int, depth: int) -> None:
    a = memscope.Allocator("sim:8GiB", config="")
    if mode != "off":
        a.start_recording(max_entries=100000, stacks=mode)
        for _ in range(34000):  # fill the ring first: the counted pairs overwrite
            a.free(a.alloc(4096))
    a.free(a.alloc(4096))

    def loop() -> None:
        for _ in range(pairs):
            a.free(a.alloc(4096))

    at_depth(depth, loop)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--count":
        count(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 10)
        return
    depth = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    a = memscope.Allocator("sim:8GiB", config="")
    a.free(a.alloc(4096))

    def loop() -> None:
        for _ in range(PAIRS):
            a.free(a.alloc(4096))

    modes = {"off": None, "events": "none", "python stacks": "python", "python+cpp stacks": "all"}
    best = {name: float("inf") for name in modes}
    for _ in range(ROUNDS):
        for name, stacks in modes.items():
            if stacks is None:
                a.stop_recording()
            else:
                a.start_recording(max_entries=100000, stacks=stacks)
                for _ in range(34000):  # fill the ring, as in a long run: events overwrite
                    a.free(a.alloc(4096))
            t = timeit.timeit(lambda: at_depth(depth, loop), number=1)
            best[name] = min(best[name], t / PAIRS * 1e9)
    a.stop_recording()
    off = best["off"]
    print(f"Allocator.alloc+free from Python, {depth} Python frames deep, best of {ROUNDS} "
          f"rounds of {PAIRS} pairs:")
    for name, ns in best.items():
        print(f"  {name:<18} {ns:7.0f} ns per pair  ({ns / off:.2f}x off)")
    print(f"recording, no stacks: {(best['events'] - off) / 3:6.1f} ns per event")
    print(f"Python stack:         {best['python stacks'] - best['events']:6.0f} ns per alloc event")
    print(f"Python + C++ stack:   {best['python+cpp stacks'] - best['events']:6.0f} ns per alloc "
          "event")


if __name__ == "__main__":
    main()
