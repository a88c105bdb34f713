"""Shared fixtures for memscope's Python tests.

GPU tests carry the `gpu` mark and skip with the reason where no CUDA device can be used; tests
of the optional integrations skip when torch / transformers are not installed.
"""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

import pytest

import memscope

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "support"))
import trace_corpus  # noqa: E402  (found through the path above)

MiB = 1 << 20
GiB = 1 << 30

_sim_sizes = itertools.count(1)


@pytest.fixture(scope="session")
def real_trace() -> Path:
    """The corpus's small train-step trace (reference numbers in its README): MEMSCOPE_TRACES,
    else ../shared/traces beside the checkout. Skips with the reason when it is not there."""
    return trace_corpus.trace_or_skip()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU (skipped without one)")
    config.addinivalue_line("markers", "distributed: launches ranks with torchrun / mpirun "
                            "(ctest's python_distributed_tests)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    available, reason = memscope._memscope._cuda_available()
    if available:
        return
    skip = pytest.mark.skip(reason=f"no usable CUDA GPU: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """With MEMSCOPE_ALL_SKIPPED_EXIT set (ctest's python_gpu_tests), a run in which every test
    was skipped exits with that code, so ctest reports the GPU tests as skipped, never passed."""
    code = os.environ.get("MEMSCOPE_ALL_SKIPPED_EXIT")
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if code and exitstatus == 0 and reporter is not None:
        if reporter.stats.get("skipped") and not reporter.stats.get("passed"):
            session.exitstatus = int(code)


def proc_status() -> dict[str, int]:
    """/proc/self/status memory fields in bytes (what the host probe must agree with)."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            parts = rest.split()
            if len(parts) == 2 and parts[1] == "kB":
                out[key] = int(parts[0]) * 1024
    return out


def meminfo() -> dict[str, int]:
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, _, rest = line.partition(":")
            parts = rest.split()
            if parts and parts[-1] == "kB":
                out[key] = int(parts[0]) * 1024
    return out


@pytest.fixture
def sim() -> memscope.Allocator:
    """A fresh 8 GiB simulated device (its own allocator, not the process default)."""
    return memscope.Allocator("sim:8GiB", config="")


@pytest.fixture
def sim_spec() -> str:
    """A simulated-device spec no other test uses, so its default allocator starts fresh."""
    return f"sim:{4096 + next(_sim_sizes)}MiB"


@pytest.fixture(params=["host", "sim:8GiB"])
def allocator(request: pytest.FixtureRequest) -> memscope.Allocator:
    """A fresh allocator on each CPU-testable backend."""
    return memscope.Allocator(request.param, config="")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("MEMSCOPE_ALLOC_CONF", raising=False)
    monkeypatch.delenv("MEMSCOPE_SKIP_MEMORY_METRICS", raising=False)
    return monkeypatch
