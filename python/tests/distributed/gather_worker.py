"""One rank of the distributed gather tests, run by torchrun (gloo) or mpirun (mpi4py).

    gather_worker.py <torch|mpi> <table|exit> <out_dir> [leaving rank, default 2]

table: rank r runs a stage "train" on a real host allocator holding (r+1)*3 MiB at its end after
a (r+1)*4 MiB temporary, and a stage "eval" ((r+1) MiB temporary) that rank 2 skips; it gathers
those metrics (dst=None), gathers again with a key only rank 1 has (the key table is agreed
again), then once more to rank 0 only without a timeout, and once in the group of its parity.
exit: one rank (default 2) never reaches the gather: under torchrun it exits; under MPI it waits
elsewhere until the others have given up (no MPI_Finalize, whose fence may wait forever once the
others have left). The others gather with a 5 s timeout. Each rank writes
<out_dir>/rank<r>.json; the test checks the numbers.
"""

from __future__ import annotations

import json
import os
import sys
import time

import memscope
import memscope.distributed as msd

MiB = 1 << 20


def init(engine: str) -> tuple[int, int]:
    if engine == "torch":
        import torch.distributed as dist
        dist.init_process_group("gloo")
        return dist.get_rank(), dist.get_world_size()
    from mpi4py import MPI
    return MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()


def parity_group(engine: str, rank: int, size: int):
    """The even ranks' or the odd ranks' group (a process group / a split communicator)."""
    if engine == "torch":
        import torch.distributed as dist
        groups = [dist.new_group(list(range(p, size, 2))) for p in (0, 1)]  # all ranks build both
        return groups[rank % 2]
    from mpi4py import MPI
    return MPI.COMM_WORLD.Split(rank % 2, rank)


def stage_metrics(rank: int) -> dict:
    host = memscope.Allocator("host", config="")
    tracker = memscope.Tracker(sources=[memscope.allocator_source(host, kind="cpu")],
                               implicit_init=False)
    held = []
    with tracker.stage("train"):
        held.append(memscope.alloc((rank + 1) * 3 * MiB, host))
        # Even MiB: above 10 MiB the caching allocator rounds a block to 2 MiB.
        memscope.free(memscope.alloc((rank + 1) * 4 * MiB, host), host)
    if rank != 2:  # a stage only some ranks run
        with tracker.stage("eval"):
            memscope.free(memscope.alloc((rank + 1) * MiB, host), host)
    for address in held:
        memscope.free(address, host)
    return tracker.metrics


def main() -> None:
    engine, scenario, out_dir = sys.argv[1:4]
    leaver = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    rank, size = init(engine)
    out: dict = {"rank": rank, "size": size}
    if scenario == "table":
        metrics = stage_metrics(rank)
        out["metrics"] = metrics
        first = msd.gather(metrics, dst=None, timeout=60)
        second_in = {**metrics, "rank1_only_bytes": 12345} if rank == 1 else metrics
        second = msd.gather(second_in, dst=None, timeout=60)
        # No arrival check (timeout=None).
        third = msd.gather({"loss": 0.25 * rank, "step": 10 + rank}, dst=0, timeout=None)
        # In the group of the ranks of this rank's parity (the groups' keys must not meet).
        fourth = msd.gather({"parity_rank": rank}, group=parity_group(engine, rank, size),
                            dst=None, timeout=60)
        out["tables"] = [first.to_dict(), second.to_dict(),
                         third.to_dict() if third is not None else None, fourth.to_dict()]
        out["format"] = first.format()
        out["engine_used"] = "torch" if "torch" in sys.modules else "mpi"
    elif scenario == "exit":
        if rank == leaver:  # never reaches the gather
            write(out_dir, rank, {**out, "left": True})
            if engine == "mpi":
                # A rank that ends (finalised or not) makes mpirun end the job: stay until every
                # rank has answered. MPI_Finalize is no way out: its fence can wait forever.
                wait_for_answers(out_dir, size)
            os._exit(0)
        start = time.monotonic()
        try:
            msd.gather({"x": rank}, dst=None, timeout=5)
            out["error"] = None
        except msd.GatherTimeout as e:
            out["error"] = str(e)
            out["missing_ranks"] = e.missing_ranks
        out["seconds"] = time.monotonic() - start
        write(out_dir, rank, out)
        # The first rank to end without MPI_Finalize makes mpirun end the others: wait (bounded)
        # until every rank has written its answer.
        wait_for_answers(out_dir, size)
        sys.stdout.flush()
        os._exit(0)  # the group is unusable after a timeout: no finalise, no destroy
    write(out_dir, rank, out)
    if engine == "torch":
        import torch.distributed as dist
        dist.destroy_process_group()


def wait_for_answers(out_dir: str, size: int, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not all(
            os.path.exists(os.path.join(out_dir, f"rank{r}.json")) for r in range(size)):
        time.sleep(0.05)


def write(out_dir: str, rank: int, out: dict) -> None:
    path = os.path.join(out_dir, f"rank{rank}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(out, f)
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main()
