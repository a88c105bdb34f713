#!/usr/bin/env python3
"""A saved metrics file of N keys (issue 44, item 12), as save_metrics and the Trainer write it
(json.dump(indent=4, sort_keys=True)): memory keys, runtimes and losses per step; 4,000,000 keys
make a 211 MB file (no NaN: memscope before issue 44 refused them). With --measure MEMSCOPE (one
or more), also runs `memscope report FILE --html` and `memscope diff FILE FILE2 --html` (FILE2:
the same keys, other values) under /usr/bin/time -v and prints each one's seconds, peak RSS and
page size, for each binary given (a build before a change and after it, say).

    python3 bench/big_metrics.py OUT.json [--keys N] [--measure MEMSCOPE]...
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile


def metrics(keys: int, seed: int) -> dict:
    out: dict = {}
    for i in range(keys):
        kind = i % 4
        step = f"step{i // 4:08d}"
        if kind == 0:
            out[f"train_mem_gpu_{step}_alloc_delta"] = (i * 2654435761 + seed) % (1 << 34)
        elif kind == 1:
            out[f"train_mem_cpu_{step}_peaked_delta"] = (i * 40503 + seed) % (1 << 30)
        elif kind == 2:
            out[f"eval_{step}_runtime"] = ((i + seed) % 100_000) / 1000.0
        else:
            out[f"train_{step}_loss"] = 1.0 / (1 + i + seed)
    return out


def write(path: str, keys: int, seed: int) -> None:
    with open(path, "w") as f:
        json.dump(metrics(keys, seed), f, indent=4, sort_keys=True)
        f.write("\n")


def measured(command: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system) and peak RSS (MB) of command, from
    /usr/bin/time -v (on a shared machine the CPU seconds are the steadier figure)."""
    done = subprocess.run(["/usr/bin/time", "-v", *command], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1))
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", done.stderr)
    seconds = 0.0
    for part in wall.group(1).split(":"):
        seconds = seconds * 60 + float(part)
    cpu = sum(float(re.search(rf"{kind} time \(seconds\): ([\d.]+)", done.stderr).group(1))
              for kind in ("User", "System"))
    return seconds, cpu, rss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--keys", type=int, default=4_000_000)
    parser.add_argument("--measure", metavar="MEMSCOPE", action="append", default=[])
    args = parser.parse_args()
    write(args.out, args.keys, 0)
    print(f"{args.out}: {args.keys:,} keys, {os.path.getsize(args.out) / 1e6:.1f} MB")
    if not args.measure:
        return
    with tempfile.TemporaryDirectory() as tmp:
        other = os.path.join(tmp, "b.json")
        write(other, args.keys, 7)
        page = os.path.join(tmp, "page.html")
        for memscope in args.measure:
            for name, command in (("report --html", [memscope, "report", args.out, "--html", page]),
                                  ("diff --html", [memscope, "diff", args.out, other, "--html",
                                                   page])):
                seconds, cpu, rss = measured(command)
                print(f"{memscope}: {name}: {seconds:.1f} s ({cpu:.1f} s CPU), peak RSS "
                      f"{rss:,.0f} MB, page "
                      f"{os.path.getsize(page) / 1e6:.1f} MB", flush=True)


if __name__ == "__main__":
    main()
