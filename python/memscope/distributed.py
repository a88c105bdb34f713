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

This module holds only the transports. The table, its reduction and text form, and the payload
(the key table and one float64 row per rank) are memscope's C++ core (memscope/rank_table.hpp,
rank_payload.hpp), the same as C++'s memscope::mpi::gather: Python and C++ ranks of one MPI job
gather together. Cost: the key table (the sorted union of the ranks' keys) is agreed once per
group and cached; each gather afterwards is one allgather of a fixed-size float64 row per rank
(torch.distributed: after a store barrier that can time out). A rank whose keys are not all in
the table makes every rank agree a grown one in the same call. Integers are exact up to 2**53
(8 PiB in bytes); a larger one is a ValueError (pass a float to accept rounding).
docs/distributed.md has the layout and the cost model for 1,024 ranks.

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

from . import _memscope

__all__ = ["gather", "RankTable", "Reduction", "GatherTimeout", "NotDistributedError",
           "DEFAULT_TIMEOUT"]

DEFAULT_TIMEOUT = 300.0
_CALLER = "memscope.distributed.gather"
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


def _ranks_text(ranks: list[int]) -> str:
    return ",".join(map(str, ranks))


class RankTable:
    """Every rank's metrics and the reduction per key.

    ranks: one dict per rank (index = rank in the group), holding only the keys that rank had.
    reductions: key -> Reduction, for every key at least one rank had (sorted).
    world_size: ranks in the group.
    """

    def __init__(self, ranks: list[dict[str, Number]]) -> None:
        self.ranks = ranks
        self.world_size = len(ranks)
        self._reduced = _memscope.reduce_ranks(ranks)
        self.reductions: dict[str, Reduction] = {
            k: _typed(r, all(isinstance(m[k], int) for m in ranks if k in m))
            for k, r in self._reduced.reductions.items()}

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
        """An aligned text table: one row per key (min, max, argmax, mean, sum, the missing ranks
        as 1-4,7), byte units for memory keys (*_mem_*, *_delta, *_bytes); memscope's C++
        layout, the same as memscope::mpi's."""
        return str(self._reduced.format())

    def __repr__(self) -> str:
        return f"RankTable(world_size={self.world_size}, keys={list(self.reductions)})"


def _typed(r: Any, ints: bool) -> Reduction:
    """The core's reduction (float64) with min, max and sum back as ints where every value was
    an int (a sum beyond 2**53 is rounded as float64 rounds it)."""
    kind = int if ints else float
    return Reduction(min=kind(r.min), max=kind(r.max), mean=r.mean, sum=kind(r.sum),
                     argmax=r.argmax, count=r.count, missing=list(r.missing))


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
        out[key] = int(value.__index__()) if hasattr(value, "__index__") else float(value)
    _memscope.rank_check(out, _CALLER)  # NaN, beyond 2**53, NUL in a key: ValueError
    return out


class _Session:
    """What one group remembers between gathers: the agreed key table and the call count."""

    def __init__(self) -> None:
        self.table: Optional[list[str]] = None
        self.calls = 0
        self.pending: list[Any] = []  # MPI: verdicts sent on a timeout, kept until they leave


_sessions: dict[Any, _Session] = {}


def _payload_rows(engine: Any, metrics: dict[str, Number]) -> tuple[list[float], list[str]]:
    """The collectives both engines run, in memscope::mpi's order (src/mpi/gather.cpp): the
    payload on the cached table; where there is none or some rank's keys do not fit, the key
    table agreed (grown) and the payload again. Returns every rank's row, concatenated and still
    encoded (only the ranks that get the table decode them), and the table."""
    session = engine.session
    if session.table is not None:
        rows = engine.allgather(_memscope.rank_encode(session.table, metrics, _CALLER))
        if _memscope.rank_payload_fits(rows, len(session.table)):
            return rows, session.table
    blobs = engine.allgather_bytes(_memscope.rank_key_blob(metrics))
    session.table = _memscope.rank_agree_table(session.table or [], blobs)
    rows = engine.allgather(_memscope.rank_encode(session.table, metrics, _CALLER))
    if not _memscope.rank_payload_fits(rows, len(session.table)):  # the table holds every key
        raise RuntimeError(f"{_CALLER}: a rank's keys did not fit the table just agreed")
    return rows, session.table


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

    def start(self) -> None:
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

    def finish(self) -> None:
        """Nothing left to complete: the arrival check was start()'s."""

    def allgather(self, row: list[float]) -> list[float]:
        torch = self.torch
        mine = torch.tensor(row, dtype=torch.float64, device=self.device)
        out = [torch.empty_like(mine) for _ in range(self.size)]
        self.dist.all_gather(out, mine, group=self.group)
        rows: list[float] = torch.cat(out).cpu().tolist()
        return rows

    def allgather_bytes(self, blob: bytes) -> bytes:
        out: list[Any] = [None] * self.size
        self.dist.all_gather_object(out, blob, group=self.group)
        return b"".join(out)


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


# memscope::mpi's tags (src/mpi/exchange.cpp), so C++ and Python ranks share one job: each rank
# sends the root its gather number; on a timeout the root sends [gather number, missing ranks...].
_ARRIVE_TAG, _VERDICT_TAG = 32760, 32761


class _MpiEngine:
    """memscope::mpi's protocol over mpi4py (include/memscope/mpi.hpp): the arrival messages to
    rank 0 and non-blocking collectives polled against the deadline, on the caller's
    communicator (no Dup: a collective that could hang)."""

    name = "MPI"

    def __init__(self, comm: Any, timeout: Optional[float]) -> None:
        try:
            import numpy as np
            from mpi4py import MPI
        except ImportError as e:
            raise NotDistributedError(
                "engine='mpi' needs mpi4py and numpy (pip install mpi4py numpy)") from e
        self.np, self.MPI = np, MPI
        self.comm = comm if comm is not None else MPI.COMM_WORLD
        self.timeout = timeout
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self.session = _sessions.setdefault(("mpi", self.comm.py2f()), _Session())
        self.arrivals: dict[int, Any] = {}  # the root: rank -> the gather number it sent
        self.arrival_requests: dict[int, Any] = {}

    def start(self) -> None:
        """Posts this rank's arrival (the root: a receive for every other rank's)."""
        np, MPI, comm = self.np, self.MPI, self.comm
        self.call = self.session.calls + 1
        wait = self.timeout if self.timeout is not None else math.inf
        self.deadline = time.monotonic() + wait
        self.give_up = self.deadline + wait  # no verdict from the root by then: it is missing
        if self.rank == 0:
            self.arrivals = {r: np.full(1, -1, dtype=np.int64) for r in range(1, self.size)}
            self.arrival_requests = {
                r: comm.Irecv([buf, MPI.INT64_T], source=r, tag=_ARRIVE_TAG)
                for r, buf in self.arrivals.items()}
        else:
            self.arrivals = {0: np.full(1, self.call, dtype=np.int64)}
            self.arrival_requests = {
                0: comm.Isend([self.arrivals[0], MPI.INT64_T], dest=0, tag=_ARRIVE_TAG)}

    def _poll(self, requests: list[Any], deadline: float) -> bool:
        """Tests ``requests`` until all complete (True) or the deadline passes (False)."""
        pause = 0.0005
        while not all(r.Test() for r in requests):
            if time.monotonic() >= deadline:
                return False
            time.sleep(pause)
            pause = min(pause * 2, 0.01)
        return True

    def _wait(self, request: Any) -> None:
        """Polls a collective until it completes; past the deadline, GatherTimeout."""
        pause = 0.0005
        while not request.Test():
            now = time.monotonic()
            if self.rank == 0:
                if now >= self.deadline:
                    self._time_out_as_root()
            else:
                if self.comm.Iprobe(source=0, tag=_VERDICT_TAG):
                    self._time_out_from_verdict()
                if now >= self.give_up:
                    raise self._timeout([0], "rank 0, which collects the arrivals, did not "
                                         "answer within 2 x the timeout")
            time.sleep(pause)
            pause = min(pause * 2, 0.01)

    def _time_out_as_root(self) -> None:
        np, MPI = self.np, self.MPI
        missing = sorted(r for r, req in self.arrival_requests.items() if not req.Test())
        verdict = np.array([self.call, *missing], dtype=np.int64)
        sends = [self.comm.Isend([verdict, MPI.INT64_T], dest=r, tag=_VERDICT_TAG)
                 for r in range(1, self.size) if r not in missing]
        # The ranks that arrived wait for this verdict: let it leave (bounded) before the error
        # may end this process; unfinished sends stay referenced, never freed.
        self._poll(sends, time.monotonic() + min(self.timeout or 5.0, 5.0))
        self.session.pending += [verdict, *sends]
        raise self._timeout(missing, "")

    def _time_out_from_verdict(self) -> None:
        np, MPI = self.np, self.MPI
        status = MPI.Status()
        self.comm.Probe(source=0, tag=_VERDICT_TAG, status=status)
        verdict = np.empty(status.Get_count(MPI.INT64_T), dtype=np.int64)
        self.comm.Recv([verdict, MPI.INT64_T], source=0, tag=_VERDICT_TAG)
        raise self._timeout([int(r) for r in verdict[1:]], "")

    def _timeout(self, missing: list[int], why: str) -> GatherTimeout:
        who = f"rank(s) {_ranks_text(missing)} of {self.size}" if missing else "some ranks"
        return GatherTimeout(
            f"{_CALLER}: {who} did not reach the gather within {self.timeout:g} s"
            f"{f' ({why})' if why else ''}; the MPI communicator still holds the abandoned "
            "requests and is unusable now: do not gather or communicate on it again, end this "
            "rank", missing)

    def finish(self) -> None:
        """Completes the arrival messages (all matched once the collectives finished)."""
        self.MPI.Request.Waitall(list(self.arrival_requests.values()))
        if self.rank != 0:
            return
        for r, sent in self.arrivals.items():
            if int(sent[0]) != self.call:
                raise RuntimeError(
                    f"{_CALLER}: rank {r} sent arrival of gather #{int(sent[0])} during gather "
                    f"#{self.call}: the ranks called gather() on this group a different number "
                    "of times")

    def allgather(self, row: list[float]) -> list[float]:
        np, MPI = self.np, self.MPI
        mine = np.asarray(row, dtype=np.float64)
        out = np.empty(self.size * mine.size, dtype=np.float64)
        self._wait(self.comm.Iallgather([mine, MPI.DOUBLE], [out, MPI.DOUBLE]))
        rows: list[float] = out.tolist()
        return rows

    def allgather_bytes(self, blob: bytes) -> bytes:
        """Every rank's blob, concatenated: the lengths, then the bytes (as memscope::mpi)."""
        np, MPI = self.np, self.MPI
        lengths = np.empty(self.size, dtype=np.intc)
        self._wait(self.comm.Iallgather([np.array([len(blob)], dtype=np.intc), MPI.INT],
                                        [lengths, MPI.INT]))
        displacements = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.intc)
        out = np.empty(max(int(lengths.sum()), 1), dtype=np.uint8)  # never a null buffer
        mine = np.frombuffer(blob, dtype=np.uint8) if blob else np.empty(1, dtype=np.uint8)
        self._wait(self.comm.Iallgatherv([mine, len(blob), MPI.CHAR],
                                         [out, (lengths, displacements), MPI.CHAR]))
        blobs: bytes = out[:int(lengths.sum())].tobytes()
        return blobs


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
      not (None: no deadline; torch.distributed: no store barrier, the group's own timeout
      applies).
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
        eng.start()
        rows, table = _payload_rows(eng, clean)
        eng.finish()
    finally:
        eng.session.calls += 1
    if dst is not None and dst != eng.rank:
        return None
    return RankTable(_memscope.rank_decode(rows, table))
