#!/usr/bin/env python3
"""Turns Google Benchmark JSON from memscope_bench (and memscope_bench_jemalloc) into the
Markdown tables of docs/benchmarks.md, so the document is regenerated, never hand-copied.

Usage: bench/summarize.py build/bench-results.json [build/bench-results-jemalloc.json ...]

`make bench` also merges "instructions_per_pair" (bench/instructions_per_pair.py) and
"thread_scaling" (memscope_thread_scaling) into build/bench-results.json; when present they are
shown first, as the hot-path tables.

Every figure is the median over repetitions (run with --benchmark_repetitions=N), with the
minimum in parentheses where the spread matters. Ratios are peer ÷ memscope on medians: above
1 memscope is faster, below 1 the peer is. Single-threaded pairs are CPU time per pair. Two-
thread pairs are wall time divided by the pairs both threads completed (the inverse of
throughput: perfect scaling would halve the single-threaded figure).
"""
import json
import statistics
import sys
from collections import defaultdict

SIZES = [512, 4096, 65536, 1 << 20, 2 << 20, 16 << 20, 32 << 20, 64 << 20, 256 << 20]
PEERS = ["glibc", "jemalloc", "mimalloc"]


def load(paths):
    """run_name -> list of iteration entries (one per repetition), and every file's top-level
    objects other than "benchmarks" (context, instructions_per_pair, thread_scaling)."""
    runs = defaultdict(list)
    context = {}
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        for key, value in data.items():
            if key != "benchmarks":
                context.setdefault(key, value)
        for b in data["benchmarks"]:
            if b.get("run_type") == "iteration" and not b.get("error_occurred"):
                runs[b["run_name"]].append(b)
    return runs, context


def ns(entry, key):
    unit = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[entry.get("time_unit", "ns")]
    return entry[key] * unit


def stat(runs, name, key="cpu_time"):
    """(median, min) in ns, or None."""
    entries = runs.get(name)
    if not entries:
        return None
    values = [ns(e, key) for e in entries]
    return statistics.median(values), min(values)


def counter(runs, name, key):
    entries = runs.get(name)
    return entries[0].get(key) if entries else None


def human(size):
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"


def fmt_ns(value):
    if value is None:
        return "n/a"
    if value >= 1e6:
        return f"{value / 1e6:.2f} ms"
    if value >= 1e4:
        return f"{value / 1e3:.1f} µs"
    if value >= 100:
        return f"{value:.0f} ns"
    return f"{value:.1f} ns"


def hit_pair_table(runs, suffix, key):
    columns = ["memscope host", "memscope sim"] + PEERS
    print("| size | " + " | ".join(columns) + " | "
          + " | ".join(f"{p} ÷ memscope host" for p in PEERS) + " |")
    print("|" + "---|" * (1 + len(columns) + len(PEERS)))
    for size in SIZES:
        names = [f"BM_CacheHitPair/host/{size}{suffix}", f"BM_CacheHitPair/sim/{size}{suffix}"]
        names += [f"BM_MallocFreePair/{p}/{size}{suffix}" for p in PEERS]
        stats = [stat(runs, n, key) for n in names]
        cells = [f"{fmt_ns(st[0])} ({fmt_ns(st[1])})" if st else "n/a" for st in stats]
        base = stats[0][0] if stats[0] else None
        ratios = [f"{st[0] / base:.2f}" if st and base else "n/a" for st in stats[2:]]
        print(f"| {human(size)} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")


def flatness_table(runs, family, sizes):
    counts = [10, 100, 1000, 10000, 100000]
    print("| cached (asked) | " + " | ".join(f"{human(s)}: blocks cached | {human(s)}: median (min)" for s in sizes) + " |")
    print("|" + "---|" * (1 + 2 * len(sizes)))
    for n in counts:
        cells = []
        for s in sizes:
            name = f"{family}/sim/{s}/cached:{n}"
            st = stat(runs, name)
            cached = counter(runs, name, "cached_blocks")
            cells.append(f"{int(cached):,}" if cached is not None else "n/a")
            cells.append(f"{fmt_ns(st[0])} ({fmt_ns(st[1])})" if st else "n/a")
        print(f"| {n:,} | " + " | ".join(cells) + " |")


def empty_cache_table(runs):
    print("| segments (2 MiB each) | sim: empty_cache() | sim: per segment | host: empty_cache() | host: per segment |")
    print("|---|---|---|---|---|")
    for n in [10, 100, 1000, 10000]:
        cells = []
        for backend in ("sim", "host"):
            st = stat(runs, f"BM_EmptyCache/{backend}/segments:{n}/manual_time", "real_time")
            cells += [fmt_ns(st[0]), fmt_ns(st[0] / n)] if st else ["—", "—"]
        print(f"| {n:,} | " + " | ".join(cells) + " |")


def mixed_table(runs):
    print("| allocator | time per operation (median) | vs memscope host | backend reserves per pass |")
    print("|---|---|---|---|")
    base = None
    for name in ["memscope-host", "memscope-sim"] + PEERS:
        entries = runs.get(f"BM_MixedWorkload/{name}")
        if not entries:
            print(f"| {name} | n/a | | |")
            continue
        per_op = statistics.median(1e9 / e["items_per_second"] for e in entries)
        base = base or per_op
        reserves = entries[0].get("backend_reserves_per_pass")
        print(f"| {name} | {per_op:.1f} ns | {per_op / base:.2f}× | "
              f"{'' if reserves is None else f'{reserves:g}'} |")


def instructions_table(report):
    sizes = report["sizes"]
    print(f"Counted by {report['method']}; user-space instructions per allocate+free pair "
          f"(goal: memscope <= {report['goal_memscope_max']}: "
          f"{'met' if report['goal_met'] else 'missed'}).\n")
    print("| allocator | " + " | ".join(human(s) for s in sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    for name, row in report["allocators"].items():
        cells = ["n/a" if row.get(str(s)) is None else f"{row[str(s)]:,.0f}" for s in sizes]
        print(f"| {name} | " + " | ".join(cells) + " |")


def thread_scaling_table(report):
    print(f"Pairs per second of all threads together, {report['seconds_per_run']} s per run; "
          f"ratios are the median over {report['repetitions']} repetitions (min in parentheses) "
          f"of N threads ÷ 1 thread in the same repetition; cores: CPU seconds the threads got "
          f"per wall second (median); per CPU: pairs per CPU second at N threads ÷ at 1 thread "
          f"(median), the cost of sharing that a busy machine hides from the wall-time ratio; "
          f"(busy: n): n repetitions whose 1-thread run got under 0.9 of a core even after "
          f"retries, so their ratios read high. "
          f"Priority: {report.get('priority', 'not recorded')}. "
          f"{report['hardware_threads']} hardware threads, load "
          f"average {report['load_average_before']} before, {report['load_average_after']} "
          f"after.\n")
    print("| subject | stream | size | 1T pairs/s | 2T ÷ 1T | 8T ÷ 1T | cores 1T / 2T / 8T "
          "| per CPU 2T / 8T |")
    print("|---|---|---|---:|---:|---:|---|---|")
    for r in report["rows"]:
        cores = r["cores_used"]
        short = r.get("one_thread_short", 0)
        busy = f" (busy: {short})" if short else ""
        print(f"| {r['subject']} | {r['stream'] or '—'} | {human(r['size']) if r['size'] else '—'} "
              f"| {r['pairs_per_second']['1']:,.0f} "
              f"| {r['ratio_2_1']:.2f} ({r['ratio_2_1_min']:.2f}) "
              f"| {r['ratio_8_1']:.2f} ({r['ratio_8_1_min']:.2f}) "
              f"| {cores['1']:.2f} / {cores['2']:.2f} / {cores['8']:.2f}{busy} "
              f"| {r['per_cpu_2_1']:.2f} / {r['per_cpu_8_1']:.2f} |")


def main(paths):
    runs, extra = load(paths)
    if "instructions_per_pair" in extra:
        print("### Hot path: instructions per hit pair\n")
        instructions_table(extra["instructions_per_pair"])
        print()
    if "thread_scaling" in extra:
        print("### Hot path: threads sharing one allocator\n")
        thread_scaling_table(extra["thread_scaling"])
        print()
    print("### Cache-hit pair, one thread (CPU time per allocate+free pair: median (min))\n")
    hit_pair_table(runs, "", "cpu_time")
    print("\n### Cache-hit pair, two threads (wall time ÷ pairs done by both threads: median (min))\n")
    hit_pair_table(runs, "/threads:2", "real_time")
    print("\n### Flatness: hit pair among cached blocks of varied sizes (CPU time per pair)\n")
    flatness_table(runs, "BM_CacheHitPairAmongCached", [4096, 3 << 20, 48 << 20])
    print("\n### Adversarial: every cached block in the request's size class (CPU time per pair)\n")
    flatness_table(runs, "BM_CacheHitPairSameClass", [3 << 20])
    print("\n### empty_cache() (median wall time of the call)\n")
    empty_cache_table(runs)
    print("\n### Mixed workload (100,000 operations per pass)\n")
    mixed_table(runs)


if __name__ == "__main__":
    main(sys.argv[1:])
