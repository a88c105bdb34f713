#!/usr/bin/env python3
"""Instructions per allocate+free hit pair, for memscope and its peers (the hot path's goal: at most
150 per memscope hit pair at every size from 512 B to 256 MiB, one thread, default settings).

Usage: bench/instructions_per_pair.py [--loop build/bench/memscope_hit_pair_loop]
                                      [--out FILE.json] [--allocators a,b] [--sizes n,m]
                                      [--method auto|perf|callgrind]

Each count runs memscope_hit_pair_loop (bench/hit_pair_loop.cpp) twice, with two pair counts,
and divides the difference in instructions by the difference in pairs: start-up, warm-up and
the loop's own set-up cancel out. The instructions are counted by the CPU (perf_event_open, user
space only, printed by the loop itself) where the kernel allows it, else by valgrind's callgrind
(its "Collected" total), which counts the same user-space instructions and does not care how
busy the machine is. Neither counts the kernel's work: glibc's mmap/munmap per pair at 32 MiB and
up, and the peers' madvise, are system calls on top of the figure.

jemalloc runs with LD_PRELOAD=libjemalloc.so.2 (it cannot be dlopen'ed beside glibc: see
bench/peers.hpp). The JSON written to --out is what `make bench` merges into
build/bench-results.json as "instructions_per_pair" (bench/merge_results.py).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

ALLOCATORS = ["memscope-host", "memscope-sim", "glibc", "mimalloc", "jemalloc"]
SIZES = [512, 4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20]
GOAL = 150  # memscope, per hit pair

# Pair counts (fewer, more). memscope hits and the peers' small sizes are a few hundred
# instructions; the peers' large sizes go to the kernel or to page-resetting paths (tens of
# thousands of instructions and a system call per pair), slow under valgrind: fewer pairs.
PAIRS_CHEAP = (20000, 40000)
PAIRS_COSTLY = (2000, 4000)


def pair_counts(allocator, size):
    if allocator.startswith("memscope-") or size < (1 << 20):
        return PAIRS_CHEAP
    return PAIRS_COSTLY


def environment(allocator):
    env = dict(os.environ)
    env.pop("MEMSCOPE_ALLOC_CONF", None)  # default settings (the loop ignores it too)
    if allocator == "jemalloc":
        env["LD_PRELOAD"] = "libjemalloc.so.2"
    return env


def run_loop(loop, allocator, size, pairs, method):
    """User-space instructions of one run: the timed loop's (perf) or the process's (callgrind)."""
    command = [loop, allocator, str(size), str(pairs)]
    if method == "callgrind":
        command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command]
    done = subprocess.run(command, env=environment(allocator), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited with {done.returncode}: "
                           f"{(done.stderr or done.stdout).strip()[-400:]}")
    if method == "perf":
        found = re.search(r"^instructions: (\d+) \(perf_event\)", done.stdout, re.M)
    else:
        found = re.search(r"Collected\s*:\s*(\d+)", done.stderr)
    if not found:
        raise RuntimeError(f"no instruction count in the output of {' '.join(command)}")
    return int(found.group(1))


def choose_method(loop, requested):
    """perf where the loop's counter works, else callgrind; (method, why perf is not used)."""
    probe = subprocess.run([loop, "memscope-sim", "4096", "1"], capture_output=True, text=True)
    lines = probe.stdout.splitlines()
    line = next((x for x in lines if x.startswith("instructions:")), "")
    perf_ok = "(perf_event)" in line
    if requested == "perf" and not perf_ok:
        sys.exit(f"--method perf: the loop cannot count: {line or probe.stderr.strip()}")
    if requested == "perf" or (requested == "auto" and perf_ok):
        return "perf", None
    if shutil.which("valgrind") is None:
        sys.exit("neither perf_event_open nor valgrind is usable: install valgrind "
                 f"(apt-get install valgrind); the loop said: {line}")
    return "callgrind", None if requested == "callgrind" else line.removeprefix("instructions: ")


def human(size):
    for unit, factor in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loop", default="build/bench/memscope_hit_pair_loop")
    parser.add_argument("--out", help="write the results here as JSON")
    parser.add_argument("--allocators", default=",".join(ALLOCATORS))
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="bytes, comma-separated")
    parser.add_argument("--method", choices=["auto", "perf", "callgrind"], default="auto")
    args = parser.parse_args()
    if not os.access(args.loop, os.X_OK):
        sys.exit(f"{args.loop} is not an executable: build the target memscope_hit_pair_loop "
                 "(cmake --build <dir> --target memscope_hit_pair_loop) or pass --loop")
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        sys.exit(f"--sizes {args.sizes!r}: expected bytes, comma-separated, like 512,4096")
    allocators = args.allocators.split(",")
    method, why_not_perf = choose_method(args.loop, args.method)

    results, errors = {}, {}
    print(f"instructions per hit pair ({method}; pairs {PAIRS_CHEAP}, "
          f"peers at 1 MiB and up {PAIRS_COSTLY})")
    print("| allocator | " + " | ".join(human(s) for s in sizes) + " |")
    print("|---|" + "---:|" * len(sizes), flush=True)
    for allocator in allocators:
        row = {}
        for size in sizes:
            few, many = pair_counts(allocator, size)
            try:
                counts = [run_loop(args.loop, allocator, size, n, method) for n in (few, many)]
                row[str(size)] = round((counts[1] - counts[0]) / (many - few), 1)
            except RuntimeError as error:
                row[str(size)] = None
                errors[f"{allocator}/{size}"] = str(error)
        results[allocator] = row
        cells = ["n/a" if v is None else f"{v:,.0f}" for v in row.values()]
        print(f"| {allocator} | " + " | ".join(cells) + " |", flush=True)
    for key, error in errors.items():
        print(f"{key}: {error}", file=sys.stderr)

    memscope = [v for a in allocators if a.startswith("memscope-") for v in results[a].values()]
    report = {
        "method": method,
        "why_not_perf": why_not_perf,
        "pairs": {"cheap": PAIRS_CHEAP, "costly": PAIRS_COSTLY},
        "goal_memscope_max": GOAL,
        "goal_met": bool(memscope) and all(v is not None and v <= GOAL for v in memscope),
        "sizes": sizes,
        "allocators": results,
        "errors": errors,
    }
    print(f"goal (memscope <= {GOAL} at every size): {'met' if report['goal_met'] else 'missed'}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
    # A peer that cannot run here (a library missing) is reported, not fatal; memscope must run.
    return 1 if any(key.startswith("memscope-") for key in errors) else 0


if __name__ == "__main__":
    sys.exit(main())
