"""What memscope.torch.watch does at an out-of-memory error, apart from PyTorch: name the files
without clobbering any, write the snapshot, explain it (memscope.Trace.explain_oom: the
allocator's state, what was live, the counterfactual replays) and print one screen on stderr.

An OomWatch is called from inside an allocator's out-of-memory path (PyTorch's OOM observer or
memscope's): it never raises; whatever goes wrong is printed as one line and the job's own
error follows unchanged. ``import memscope`` honours ``MEMSCOPE_WATCH`` (set by
``memscope run --watch DIR``): when torch is imported, ``memscope.torch.watch(DIR)`` runs.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import IO, Any, Optional

from ._memscope import Trace

ENV = "MEMSCOPE_WATCH"


@dataclass
class OomFiles:
    """The files written for one out-of-memory error."""

    snapshot: Path  # PyTorch's snapshot format (its viewer opens it)
    report_json: Path
    report_html: Path
    text: str = ""  # what was printed on stderr


def rank_of_process() -> int:
    """The process's rank as launchers set it (RANK, then the MPI launchers' names), else 0."""
    for name in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"):
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 0


def reserve_names(directory: Path, rank: int) -> OomFiles:
    """oom-rank{R}-pid{P}.pickle (+ .json, .html), or -2, -3... when an earlier OOM of this
    process took the name: the snapshot's name is claimed atomically (O_EXCL), so two OOMs never
    write the same files."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = f"oom-rank{rank}-pid{os.getpid()}"
    n = 1
    while True:
        name = stem if n == 1 else f"{stem}-{n}"
        snapshot = directory / f"{name}.pickle"
        try:
            os.close(os.open(snapshot, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            n += 1
            continue
        return OomFiles(snapshot, directory / f"{name}.json", directory / f"{name}.html")


@dataclass
class OomWatch:
    """Turns an out-of-memory error into files and one screen of text."""

    directory: Path
    rank: int = field(default_factory=rank_of_process)
    counterfactuals: bool = True
    stream: Optional[IO[str]] = None  # None: sys.stderr at the moment of the OOM
    written: list[OomFiles] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, device_name: str, write_snapshot: Callable[[Path], Trace], device: int = 0,
               capacity: Optional[int] = None,
               live: Optional[Callable[[Any], None]] = None) -> Optional[OomFiles]:
        """Writes the snapshot (write_snapshot(path) returns it as a Trace), explains its last
        OOM on `device`, writes the report beside it and prints it. `live(explanation)` adds
        what only the running job can measure. Never raises."""
        stream = self.stream or sys.stderr
        try:
            with self.lock:
                files = reserve_names(self.directory, self.rank)
                trace = write_snapshot(files.snapshot)
                ooms = trace.ooms(device)
                x = trace.explain_oom(device=device, which=max(len(ooms) - 1, 0),
                                      capacity=capacity,
                                      counterfactuals=self.counterfactuals,
                                      source=str(files.snapshot))
                if live is not None:
                    live(x)
                x.notes = [*x.notes, f"Snapshot: {files.snapshot} (PyTorch's format: "
                           "https://pytorch.org/memory_viz opens it); report: "
                           f"{files.report_json}, {files.report_html}."]
                title = (f"memscope: out of memory on {device_name} "
                         f"(rank {self.rank}, pid {os.getpid()})")
                report = x.to_report(title)
                report.write_json(files.report_json)
                report.write_html(files.report_html)
                files.text = report.to_text()
                self.written.append(files)
            stream.write(files.text)
            stream.flush()
            return files
        except BaseException as e:  # nothing may leave an allocator's OOM path
            try:
                stream.write(f"memscope: could not explain the out-of-memory error: "
                             f"{type(e).__name__}: {e}\n")
                if os.environ.get("MEMSCOPE_DEBUG"):
                    traceback.print_exc(file=stream)
            except BaseException:  # a closed stream: nothing left to say
                pass
            return None


class _AfterImport(importlib.abc.MetaPathFinder):
    """Calls `then(module)` once `name` has been imported (a post-import hook)."""

    def __init__(self, name: str, then: Callable[[ModuleType], None]) -> None:
        self.name = name
        self.then = then

    def find_spec(self, fullname: str, path: Optional[Sequence[str]],
                  target: Optional[ModuleType] = None) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module
        then = self.then

        def exec_then(module: ModuleType) -> None:
            exec_module(module)
            then(module)

        loader.exec_module = exec_then  # type: ignore[method-assign]
        return spec


def _watch_from_env(_: object = None) -> None:
    directory = os.environ.get(ENV, "")
    try:
        from . import torch as memscope_torch

        memscope_torch.watch(directory or ".")
    except Exception as e:  # the job runs unwatched, and says so
        print(f"memscope: {ENV}={directory}: not watching for out-of-memory errors: {e}",
              file=sys.stderr)


def honour_environment() -> None:
    """MEMSCOPE_WATCH=DIR: watch for out-of-memory errors once torch is imported (now, if it
    already is). Called by ``import memscope``."""
    if not os.environ.get(ENV):
        return
    if "torch" in sys.modules:
        _watch_from_env()
    elif not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport("torch", _watch_from_env))
