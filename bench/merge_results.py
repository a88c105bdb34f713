#!/usr/bin/env python3
"""Merges JSON files into one Google Benchmark results file as top-level objects, so that
build/bench-results.json carries every figure `make bench` measured in one run (the hot path's
"instructions_per_pair" and "thread_scaling" beside Google Benchmark's "benchmarks").

Usage: bench/merge_results.py build/bench-results.json KEY=FILE.json [KEY=FILE.json ...]

A key already in the target is replaced; the rest of the target is kept as it is.
"""
import json
import os
import sys


def main(argv):
    if len(argv) < 2 or any("=" not in a for a in argv[1:]):
        sys.exit("usage: bench/merge_results.py TARGET.json KEY=FILE.json [KEY=FILE.json ...]")
    target = argv[0]
    try:
        with open(target) as f:
            merged = json.load(f)
    except FileNotFoundError:
        sys.exit(f"{target} does not exist: run memscope_bench with --benchmark_out={target} first")
    for pair in argv[1:]:
        key, path = pair.split("=", 1)
        with open(path) as f:
            merged[key] = json.load(f)
    with open(target + ".tmp", "w") as f:
        json.dump(merged, f, indent=1)
        f.write("\n")
    os.replace(target + ".tmp", target)


if __name__ == "__main__":
    main(sys.argv[1:])
