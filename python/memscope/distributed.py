"""Metrics across ranks: one table per gather, with min / max / mean / sum and who holds the max.

    table = memscope.distributed.gather(tracker.metrics)        # every rank calls; rank 0 gets it
    if table is not None:
        print(table.format())
        table.reductions["train_mem_cpu_peaked_delta"].argmax  # the rank that peaked highest

Engines (``engine="auto"`` picks the first that applies): torch.distributed when it is
initialised (any backend: gloo on CPU, NCCL on GPU), else MPI through mpi4py when this process
is an MPI rank (an MPI launcher's environment, OMPI_COMM_WORLD_SIZE / PMI_SIZE / PMIX_RANK, or
mpi4py already imported with more than one rank), else :class:`NotDistributedError`. Importing
this module imports neither torch nor mpi4py; a gather imports the engine it uses.

Cost: the key table (the sorted union of the ranks' keys) is agreed once per group, with one
object collective, and cached; each gather afterwards is one barrier that can time out and one
allgather of a fixed-size float64 vector per rank (NaN = missing). A rank whose keys are not all
in the table makes every rank agree a new one in the same call (two more collectives). Integers
are exact up to 2**53 (8 PiB in bytes); a larger one is a ValueError (pass a float to accept
rounding). docs/distributed.md has the layout and the cost model for 1,024 ranks.

Thread safety: a gather is a collective; call it from one thread per rank, in the same order on
every rank of the group, as any torch.distributed or MPI collective.
"""

from __future__ import annotations

import datetime
import math
import os
import re
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from ._memscope import format_bytes

__all__ = ["gather", "RankTable", "Reduction", "GatherTimeout", "NotDistributedError",
           "DEFAULT_TIMEOUT"]

DEFAULT_TIMEOUT = 300.0
_EXACT = 2**53  # float64 holds every integer up to here
_FLAG_BITS = 52  # int flags per float64 word: integers below 2**52 are exact
_HEADER = 2  # [needs a new table (0/1), table size]
_MPI_ENV = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE")

Number = Union[int, float]


class NotDistributedError(RuntimeError):
    """gather() found neither an initialised torch.distributed nor an MPI rank."""


class GatherTimeout(RuntimeError):
    """Some ranks did not reach the gather within the timeout.

    missing_ranks: the ranks (in the group) that did not arrive, as far as this rank can know
    (torch.distributed: rank 0 watches the barrier and tells the others through the store; MPI:
    the root counts arrivals and tells the others). Empty where the engine does not say (NCCL).
    After a timeout the process group / communicator may be unusable: the collective that timed
    out can still be pending on it.
    """

    def __init__(self, message: str, missing_ranks: list[int]) -> None:
        super().__init__(message)
        self.missing_ranks = missing_ranks


@dataclass(frozen=True)
class Reduction:
    """One key over the ranks that have it (a missing key is never counted as 0)."""

    min: Number
    max: Number
    mean: float
    sum: Number
    argmax: int  # the lowest rank holding the max
    count: int  # ranks that have the key
    missing: list[int] = field(default_factory=list)  # ranks that do not


_BYTE_KEY = re.compile(r"(_mem_|_delta$|_bytes$)")


def _fmt(key: str, value: Optional[Number]) -> str:
    if value is None:
        return "-"
    if _BYTE_KEY.search(key) and math.isfinite(value):
        return format_bytes(round(value))
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _ranks_text(ranks: list[int]) -> str:
    """[1, 2, 3, 7] -> "1-3,7": short even when many ranks miss a key."""
    parts: list[str] = []
    i = 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        parts.append(str(ranks[i]) if i == j else f"{ranks[i]}-{ranks[j]}")
        i = j + 1
    return ",".join(parts)


class RankTable:
    """Every rank's metrics and the reduction per key.

    ranks: one dict per rank (index = rank in the group), holding only the keys that rank had.
    reductions: key -> Reduction, for every key at least one rank had (sorted).
    world_size: ranks in the group.
    """

    def __init__(self, ranks: list[dict[str, Number]]) -> None:
        self.ranks = ranks
        self.world_size = len(ranks)
        keys = sorted({k for r in ranks for k in r})
        self.reductions: dict[str, Reduction] = {k: self._reduce(k) for k in keys}

    def _reduce(self, key: str) -> Reduction:
        have = [(r, m[key]) for r, m in enumerate(self.ranks) if key in m]
        values = [v for _, v in have]
        top = max(values)
        total = sum(values)
        return Reduction(min=min(values), max=top, mean=total / len(values), sum=total,
                         argmax=next(r for r, v in have if v == top), count=len(values),
                         missing=[r for r, m in enumerate(self.ranks) if key not in m])

    def per_rank_metrics(self, rank: int) -> dict[str, Number]:
        """The metrics ``rank`` gave (a copy); IndexError for a rank outside the group."""
        if not 0 <= rank < self.world_size:
            raise IndexError(f"rank {rank} is not in this table (world size {self.world_size})")
        return dict(self.ranks[rank])

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: {"world_size", "ranks": [...], "reductions": {key: {min, max, ...}}}."""
        return {"world_size": self.world_size, "ranks": [dict(r) for r in self.ranks],
                "reductions": {k: vars(v) | {"missing": list(v.missing)}
                               for k, v in self.reductions.items()}}

    def format(self) -> str:
        """An aligned text table: one row per key, byte units for memory keys (*_mem_*,
        *_delta, *_bytes), and the ranks missing each key."""
        head = ("key", "min", "max", "argmax", "mean", "sum", "missing")
        rows = [head]
        for k, r in self.reductions.items():
            rows.append((k, _fmt(k, r.min), _fmt(k, r.max), str(r.argmax), _fmt(k, r.mean),
                         _fmt(k, r.sum), _ranks_text(r.missing) or "-"))
        widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
        lines = [f"memscope: {len(self.reductions)} metrics over {self.world_size} ranks"]
        for row in rows:
            cells = [row[0].ljust(widths[0])]
            cells += [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
            lines.append("  ".join(cells).rstrip())
        return "\n".join(lines) + "\n"

    def __repr__(self) -> str:
        return f"RankTable(world_size={self.world_size}, keys={list(self.reductions)})"


# Payload ----------------------------------------------------------------------------------


def _check(metrics: Mapping[str, Any]) -> dict[str, Number]:
    """The metrics as ints and floats; TypeError / ValueError naming the key otherwise."""
    if not isinstance(metrics, Mapping):
        raise TypeError(f"gather() takes a dict of metrics, not {type(metrics).__name__}")
    out: dict[str, Number] = {}
    for key, value in metrics.items():
        if not isinstance(key, str):
            raise TypeError(f"metric key {key!r} is a {type(key).__name__}: keys must be str")
        if isinstance(value, (str, bytes)) or not hasattr(value, "__float__"):
            raise TypeError(f"metric {key!r} is {value!r} ({type(value).__name__}): gather() "
                            "takes numbers only; leave text (such as *_mode) out")
        if hasattr(value, "__index__"):
            number: Number = int(value.__index__())
            if abs(number) > _EXACT:
                raise ValueError(f"metric {key!r} = {number} is beyond 2**53, where float64 "
                                 "stops being exact; pass it as a float to accept rounding")
        else:
            number = float(value)
            if math.isnan(number):
                raise ValueError(f"metric {key!r} is NaN, which marks a missing key in the "
                                 "payload; leave the key out instead")
        out[key] = number
    return out


def _encode(metrics: dict[str, Number], table: list[str], needs_table: bool) -> list[float]:
    """[needs_table, K, value per table key (NaN = missing)..., int-flag words...]."""
    values = [math.nan] * len(table)
    words = [0] * _flag_words(len(table))
    index = {k: i for i, k in enumerate(table)}
    for k, v in metrics.items():
        i = index.get(k)
        if i is None:
            continue  # not in the table: this call re-agrees it and encodes again
        values[i] = float(v)
        if isinstance(v, int):
            words[i // _FLAG_BITS] |= 1 << (i % _FLAG_BITS)
    return [1.0 if needs_table else 0.0, float(len(table)), *values, *map(float, words)]


def _flag_words(k: int) -> int:
    return (k + _FLAG_BITS - 1) // _FLAG_BITS


def _decode(row: list[float], table: list[str]) -> dict[str, Number]:
    k = len(table)
    if int(row[1]) != k:
        raise RuntimeError(f"memscope.distributed: a rank sent a payload for {int(row[1])} keys "
                           f"where this one has {k}: the ranks' key tables disagree (were "
                           "gathers on this group called in different orders?)")
    words = [int(w) for w in row[_HEADER + k:]]
    out: dict[str, Number] = {}
    for i, key in enumerate(table):
        v = row[_HEADER + i]
        if math.isnan(v):
            continue
        out[key] = int(v) if words[i // _FLAG_BITS] >> (i % _FLAG_BITS) & 1 else v
    return out


class _Session:
    """What one group remembers between gathers: the agreed key table and the call count."""

    def __init__(self) -> None:
        self.table: Optional[list[str]] = None
        self.calls = 0
        self.comm: Any = None  # MPI: memscope's duplicate of the communicator
        self.pending: list[Any] = []  # MPI: verdicts sent on a timeout, kept until they leave


_sessions: dict[Any, _Session] = {}


def _payload_rows(engine: Any, metrics: dict[str, Number]) -> tuple[list[list[float]], list[str]]:
    """The collective part shared by both engines: agree the table if needed, then one allgather
    (a second agreement and allgather only when some rank brought new keys). Returns the rows,
    still encoded (only the ranks that get the table decode them), and the table."""
    session = engine.session
    if session.table is None:
        session.table = _agree(engine, set(metrics))
    while True:
        table = session.table
        needs = not set(metrics) <= set(table)
        rows = engine.allgather(_encode(metrics, table, needs), len(table))
        if not any(row[0] for row in rows):
            return rows, table
        session.table = _agree(engine, set(table) | set(metrics))


def _agree(engine: Any, keys: set[str]) -> list[str]:
    return sorted(set().union(*engine.allgather_object(sorted(keys))))


# torch.distributed ------------------------------------------------------------------------


def _torch_ready() -> bool:
    if "torch" not in sys.modules:  # never import torch only to find it unused
        return False
    import torch.distributed as dist
    return bool(dist.is_available() and dist.is_initialized())


_MISSING_RE = re.compile(r"Ranks? ([\d, ]+) failed to pass monitoredBarrier")


class _TorchEngine:
    name = "torch.distributed"

    def __init__(self, group: Any, timeout: Optional[float]) -> None:
        import torch
        import torch.distributed as dist
        if not (dist.is_available() and dist.is_initialized()):
            raise NotDistributedError(
                "engine='torch' but torch.distributed is not initialised: call "
                "torch.distributed.init_process_group() first (torchrun sets its environment)")
        self.torch, self.dist, self.group, self.timeout = torch, dist, group, timeout
        self.rank = dist.get_rank(group)
        self.size = dist.get_world_size(group)
        self.backend = str(dist.get_backend(group))
        self.name_in_store = "world" if group is None else str(getattr(group, "group_name", "g"))
        self.session = _sessions.setdefault(("torch", self.name_in_store), _Session())
        self.device = (torch.device("cuda", torch.cuda.current_device())
                       if self.backend == "nccl" else torch.device("cpu"))

    def barrier(self) -> None:
        """Every rank arrives within the timeout, or GatherTimeout naming who did not.

        Through the group's store (c10d's TCPStore, reachable from every rank): each rank
        appends its rank to this call's arrival list and adds 1 to its count; the last to
        arrive marks the call complete; each rank waits for that mark with the store's own
        timeout, and on a timeout reads the list, so every rank names the missing ones. Where
        the store is not reachable, gloo's monitored_barrier (which names them on rank 0 only)
        or a barrier with a timed wait (other backends) stands in."""
        if self.timeout is None:
            return
        store = _store(self.dist)
        if store is None or not hasattr(store, "append"):
            self._fallback_barrier()
            return
        # A job torchrun restarted keeps its store: the restart count keeps the keys apart.
        attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        prefix = f"memscope/gather/{attempt}/{self.name_in_store}/{self.session.calls}"
        try:
            store.append(prefix + "/ranks", f"{self.rank},")
            if store.add(prefix + "/count", 1) == self.size:
                store.set(prefix + "/done", "1")
            store.wait([prefix + "/done"], datetime.timedelta(seconds=self.timeout))
            return
        except Exception as e:  # the store's timeout, or the store itself gone
            failure = e
        try:
            arrived = {int(r) for r in store.get(prefix + "/ranks").decode().split(",") if r}
            missing = sorted(set(range(self.size)) - arrived)
        except Exception:  # the store is unreachable: it lives in rank 0 without torchrun
            missing = [0] if self.rank != 0 else []
        raise self._timeout(missing, failure)

    def _timeout(self, missing: list[int], cause: Exception) -> GatherTimeout:
        who = f"rank(s) {_ranks_text(missing)}" if missing else "some ranks"
        return GatherTimeout(
            f"memscope.distributed.gather: {who} of {self.size} did not reach the gather within "
            f"{self.timeout:g} s ({self.backend}); the process group may be unusable now if "
            f"they are gone. Engine error: {str(cause).splitlines()[0] if str(cause) else cause!r}",
            missing)

    def _fallback_barrier(self) -> None:
        dist, wait = self.dist, datetime.timedelta(seconds=self.timeout or 0)
        try:
            if "gloo" in self.backend:
                dist.monitored_barrier(group=self.group, timeout=wait, wait_all_ranks=True)
            else:
                dist.barrier(group=self.group, async_op=True).wait(timeout=wait)
        except RuntimeError as e:
            found = _MISSING_RE.search(str(e))  # rank 0's message names them
            missing = [int(r) for r in found.group(1).replace(",", " ").split()] if found else []
            raise self._timeout(missing, e) from e

    def allgather(self, row: list[float], k: int) -> list[list[float]]:
        torch = self.torch
        mine = torch.tensor(row, dtype=torch.float64, device=self.device)
        out = [torch.empty_like(mine) for _ in range(self.size)]
        self.dist.all_gather(out, mine, group=self.group)
        return [t.cpu().tolist() for t in out]

    def allgather_object(self, obj: Any) -> list[Any]:
        out: list[Any] = [None] * self.size
        self.dist.all_gather_object(out, obj, group=self.group)
        return out


def _store(dist: Any) -> Any:
    """The default group's store (rank 0's verdict on a timeout goes through it), or None."""
    try:
        return dist.distributed_c10d._get_default_store()
    except Exception:
        return None


# MPI ----------------------------------------------------------------------------------------


def _mpi_rank_here() -> bool:
    if any(v in os.environ for v in _MPI_ENV):
        return True
    mpi = sys.modules.get("mpi4py.MPI")
    return mpi is not None and mpi.COMM_WORLD.Get_size() > 1


_ARRIVED, _VERDICT = 0x6D73, 0x6D74  # tags of the arrival messages and root's verdict


class _MpiEngine:
    name = "MPI"

    def __init__(self, comm: Any, timeout: Optional[float]) -> None:
        try:
            import numpy as np
            from mpi4py import MPI
        except ImportError as e:
            raise NotDistributedError(
                "engine='mpi' needs mpi4py and numpy (pip install mpi4py numpy)") from e
        self.np, self.MPI = np, MPI
        self.user_comm = comm if comm is not None else MPI.COMM_WORLD
        self.timeout = timeout
        self.rank = self.user_comm.Get_rank()
        self.size = self.user_comm.Get_size()
        self.session = _sessions.setdefault(("mpi", self.user_comm.py2f()), _Session())
        # memscope's own duplicate after the first barrier, so its messages never meet the
        # program's; the first barrier runs on the program's communicator with memscope's tags.
        self.comm = self.session.comm or self.user_comm

    def _poll(self, requests: list[Any], deadline: float, root_arrivals: Any = None) -> bool:
        """Tests ``requests`` until all complete (True) or the deadline passes (False)."""
        pause = 0.0005
        while True:
            if root_arrivals is not None:
                root_arrivals()
            if all(r.Test() for r in requests):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(pause)
            pause = min(pause * 2, 0.01)

    def barrier(self) -> None:
        if self.timeout is None:
            self.comm.Barrier()
            self._dup()
            return
        MPI, comm, root = self.MPI, self.comm, 0
        deadline = time.monotonic() + self.timeout
        arrived = {self.rank}
        recvs: dict[int, Any] = {}
        sends: list[Any] = []
        token = bytearray(1)
        if self.rank == root:
            bufs = {r: bytearray(1) for r in range(self.size) if r != root}
            recvs = {r: comm.Irecv([b, MPI.BYTE], source=r, tag=_ARRIVED) for r, b in bufs.items()}
        else:
            sends.append(comm.Isend([token, MPI.BYTE], dest=root, tag=_ARRIVED))
        verdict = self.np.full(self.size + 1, -1, dtype=self.np.int64)
        verdict_recv = (comm.Irecv([verdict, MPI.INT64_T], source=root, tag=_VERDICT)
                        if self.rank != root else None)

        def count() -> None:
            for r, req in list(recvs.items()):
                if req.Test():
                    arrived.add(r)
                    del recvs[r]

        barrier = comm.Ibarrier()
        if self._poll([barrier], deadline, count if self.rank == root else None):
            MPI.Request.Waitall([*recvs.values(), *sends])
            if verdict_recv is not None:
                verdict_recv.Cancel()
                verdict_recv.Wait()
            self._dup()
            return
        if self.rank == root:
            missing = sorted(set(range(self.size)) - arrived)
            verdict[0] = len(missing)
            verdict[1:1 + len(missing)] = missing
            sends = [comm.Isend([verdict, MPI.INT64_T], dest=r, tag=_VERDICT)
                     for r in arrived - {root}]
            # The ranks that arrived wait for this verdict: let it leave (bounded) before the
            # error may end this process; unfinished sends stay referenced, never freed.
            self._poll(sends, time.monotonic() + min(self.timeout, 5.0))
            self.session.pending += sends
        elif self._poll([verdict_recv], time.monotonic() + self.timeout):
            missing = [int(r) for r in verdict[1:1 + int(verdict[0])]]
        else:
            missing = [root]  # had the root arrived, its verdict would be here by now
        raise GatherTimeout(
            f"memscope.distributed.gather: rank(s) {_ranks_text(missing)} of {self.size} did "
            f"not reach the gather within {self.timeout:g} s; the MPI communicator may be "
            "unusable now (its barrier is still pending)", missing)

    def _dup(self) -> None:
        if self.session.comm is None:
            self.session.comm = self.user_comm.Dup()
            self.comm = self.session.comm

    def allgather(self, row: list[float], k: int) -> list[list[float]]:
        np, MPI = self.np, self.MPI
        mine = np.asarray(row, dtype=np.float64)
        out = np.empty((self.size, mine.size), dtype=np.float64)
        req = self.comm.Iallgather([mine, MPI.DOUBLE], [out, MPI.DOUBLE])
        deadline = time.monotonic() + (self.timeout if self.timeout is not None else math.inf)
        if not self._poll([req], deadline):
            raise GatherTimeout(
                "memscope.distributed.gather: the payload allgather did not complete within "
                f"{self.timeout:g} s after every rank arrived (a rank failed in between?); the "
                "MPI communicator may be unusable now", [])
        rows: list[list[float]] = out.tolist()
        return rows

    def allgather_object(self, obj: Any) -> list[Any]:
        return self.comm.allgather(obj)


# Entry point --------------------------------------------------------------------------------


def _engine(engine: str, group: Any, timeout: Optional[float]) -> Any:
    if engine == "torch":
        return _TorchEngine(group, timeout)
    if engine == "mpi":
        return _MpiEngine(group, timeout)
    if engine != "auto":
        raise ValueError(f"engine={engine!r}: use 'auto', 'torch' or 'mpi'")
    if _torch_ready():
        return _TorchEngine(group, timeout)
    if _mpi_rank_here():
        return _MpiEngine(group, timeout)
    raise NotDistributedError(
        "memscope.distributed.gather: torch.distributed is not initialised and this process is "
        "not an MPI rank. Launch with torchrun and call torch.distributed.init_process_group() "
        "(gloo on CPU, nccl on GPU), or launch with mpirun / srun with mpi4py installed")


def gather(metrics: Mapping[str, Any], *, group: Any = None, dst: Optional[int] = 0,
           timeout: Optional[float] = DEFAULT_TIMEOUT, engine: str = "auto") -> Optional[RankTable]:
    """Gathers every rank's ``metrics`` into a RankTable. Every rank of the group must call it.

    metrics: str -> int or float (numpy scalars too); keys may differ between ranks (a key a
      rank lacks is reported missing for it, never as 0). Text values are a TypeError, NaN and
      integers beyond 2**53 a ValueError, each naming the key.
    group: a torch.distributed process group or an mpi4py communicator (None: the whole world).
    dst: the rank (in the group) that gets the table, the others get None; None: every rank.
    timeout: seconds every rank has to arrive; after it, GatherTimeout naming the ranks that did
      not (None: no barrier, the engine's own group timeout applies).
    engine: "auto", "torch" or "mpi" (see the module docstring); NotDistributedError when none
      applies.
    """
    clean = _check(metrics)
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout={timeout!r}: give a positive number of seconds (or None)")
    eng = _engine(engine, group, timeout)
    if dst is not None and not 0 <= dst < eng.size:
        raise ValueError(f"dst={dst}: not a rank of this group of {eng.size} (or None: all)")
    try:
        eng.barrier()
        rows, table = _payload_rows(eng, clean)
    finally:
        eng.session.calls += 1
    if dst is not None and dst != eng.rank:
        return None
    return RankTable([_decode(row, table) for row in rows])
