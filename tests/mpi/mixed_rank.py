"""Ranks 2 and 3 of a job whose ranks 0 and 1 run the C++ mpi_gather_main (an MPMD mpirun; see
run_mpi.cmake): memscope.distributed.gather over mpi4py beside memscope::mpi::gather. Each
round gathers what mixed_metrics() says (mpi_gather_main.cpp's mixed_metrics says the same),
and every rank that gets the table checks all of it: every rank's values and their types, the
reductions, the text. Failures are printed as "rank r: FAIL ..." and summed over the job with
the C++ ranks (one MPI_Allreduce of an int, as mpi_gather_main does).

    mixed_rank.py mixed          the gathers above
    mixed_rank.py leave <rank>   as mpi_gather_main's leave: one gather together, then <rank>
                                 ends (mpi4py finalizes at exit) and the others must get a
                                 GatherTimeout naming it (5 s), whichever language each runs"""

from __future__ import annotations

import sys
import time

import numpy as np
from mpi4py import MPI

import memscope.distributed as msd

COMM = MPI.COMM_WORLD
RANK = COMM.Get_rank()
failures = 0


def expect(ok: bool, what: str) -> None:
    global failures
    if not ok:
        failures += 1
        print(f"rank {RANK}: FAIL {what}", flush=True)


def mixed_metrics(r: int, round_: int) -> dict[str, int | float]:
    m: dict[str, int | float] = {"shared_mem_delta": (r + 1) << 20, "step": 10 + r,
                                 "loss": 0.25 * r,
                                 ("cpp_only_bytes" if r < 2 else "python_only_bytes"): 1000 + r}
    if round_ >= 1 and r == 3:
        m["only3"] = 7
    if round_ >= 2 and r == 1:
        m["only1"] = 0.5
    return m


def main() -> int:
    size = COMM.Get_size()
    expect(size == 4 and RANK >= 2, f"run as ranks 2-3 of 4 (this is rank {RANK} of {size})")
    for round_ in range(3):
        dst = 0 if round_ == 2 else None
        table = msd.gather(mixed_metrics(RANK, round_), dst=dst, timeout=60, engine="mpi")
        what = f"mixed round {round_}"
        expect((table is None) == (dst is not None), f"{what}: table on the right ranks")
        if table is None:
            continue
        want = [mixed_metrics(r, round_) for r in range(size)]
        expect(table.ranks == want, f"{what}: ranks {table.ranks} != {want}")
        expect(all(type(v) is type(want[r][k]) for r, row in enumerate(table.ranks)
                   for k, v in row.items()), f"{what}: C++ ints arrive as int, fractions float")
        expect(table.format() == msd.RankTable(want).format(), f"{what}: format()")
        expect(table.reductions["python_only_bytes"].missing == [0, 1],
               f"{what}: the Python key is missing on the C++ ranks")
        expect(table.reductions["shared_mem_delta"].max == 4 << 20
               and table.reductions["shared_mem_delta"].argmax == 3, f"{what}: max, argmax")
        if round_ >= 1:
            expect(table.reductions["only3"].count == 1, f"{what}: only3 from rank 3 only")
    total = np.zeros(1, dtype=np.intc)
    COMM.Allreduce(np.array([failures], dtype=np.intc), total, op=MPI.SUM)
    return 0 if int(total[0]) == 0 else 1


def leave(leaver: int) -> int:
    first = msd.gather({"x": float(RANK)}, dst=0, timeout=60, engine="mpi")
    expect(first is None, "the first gather's table goes to rank 0 only")
    if RANK == leaver:
        print(f"rank {RANK}: leaving without gathering", flush=True)
        return 0  # mpi4py calls MPI_Finalize at exit
    start = time.monotonic()
    try:
        msd.gather({"x": float(RANK)}, dst=0, timeout=5, engine="mpi")
        expect(False, f"gather returned although rank {leaver} left")
    except msd.GatherTimeout as e:
        ms = round((time.monotonic() - start) * 1000)
        expect(e.missing_ranks == [leaver], f"missing_ranks names the rank that left: {e}")
        if e.missing_ranks == [leaver]:
            print(f"rank {RANK}: TIMEOUT-OK after {ms} ms: missing rank {leaver}: {e}",
                  flush=True)
    return 0 if failures == 0 else 1  # the communicator is unusable: no Allreduce


if __name__ == "__main__":
    sys.exit(leave(int(sys.argv[2])) if sys.argv[1:2] == ["leave"] else main())
