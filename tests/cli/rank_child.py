"""A rank of a distributed job for the tests of `memscope run`'s per-rank lines: started by
torchrun, mpirun or by hand with RANK set. It touches (rank + 1) * MIB MiB, writes its pid to
OUT/rank-<rank>.pid, holds the memory for HOLD seconds (so that memscope samples it) and exits.
Under memscope it marks the stage "alloc" around its allocation on every rank, and rank 0 also a
stage "rank0_only" (a stage only some ranks run), writing the mark lines of docs/cli.md itself.
With WORKER_MIB > 0 it first forks a worker (as a DataLoader would) that touches WORKER_MIB MiB,
writes OUT/worker-<rank>.pid and holds it as long, in a stage "worker"; it inherits the rank's
environment.

    python rank_child.py MIB HOLD OUT [WORKER_MIB]

No torch import: torchrun only sets the environment, and importing torch costs seconds a rank.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "LOCAL_RANK")


def vm_hwm() -> int:
    """This process's peak RSS so far (VmHWM), in bytes. A mark carries it, so memscope knows
    the rank's peak exactly even if the machine is too busy for a sample to catch it."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return -1


def mark(kind: str, stage: str, metrics: dict[str, int] | None = None) -> None:
    """One stage mark line, in one write, to the pipe `memscope run` names (if any)."""
    path = os.environ.get("MEMSCOPE_MARKS_PATH")
    if not path:
        return
    line = {"memscope_mark": 1, "kind": kind, "stage": stage, "pid": os.getpid(),
            "t_ns": time.clock_gettime_ns(time.CLOCK_MONOTONIC), "hwm": vm_hwm()}
    if metrics:
        line["metrics"] = metrics
    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


def touched(mib: int) -> bytearray:
    block = bytearray(mib << 20)
    for i in range(0, len(block), 4096):
        block[i] = 1
    return block


def main() -> None:
    mib, hold, out = int(sys.argv[1]), float(sys.argv[2]), Path(sys.argv[3])
    worker_mib = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    rank = next(int(os.environ[v]) for v in RANK_VARIABLES if v in os.environ)
    worker = 0
    if worker_mib > 0:
        worker = os.fork()
        if worker == 0:
            mark("begin", "worker")
            block = touched(worker_mib)
            mark("end", "worker")  # with its VmHWM: its peak is exact
            (out / f"worker-{rank}.pid").write_text(str(os.getpid()))
            time.sleep(hold)
            del block
            os._exit(0)
    mark("begin", "alloc")
    block = touched((rank + 1) * mib)
    mark("end", "alloc", {"cpu_alloc_delta": len(block)})
    if rank == 0:
        mark("begin", "rank0_only")
        mark("end", "rank0_only")
    (out / f"rank-{rank}.pid").write_text(str(os.getpid()))
    time.sleep(hold)
    del block
    if worker:
        os.waitpid(worker, 0)


if __name__ == "__main__":
    main()
