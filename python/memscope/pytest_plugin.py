"""Memory as a test contract: a pytest plugin (``pytest --memscope``).

A test marked ``@pytest.mark.memscope(peak="2GiB", growth=0)`` fails when, while it ran, the
memory it added at its peak exceeded ``peak``, or the memory it left allocated when it returned
exceeded ``growth`` (bytes or a size such as "1MiB"; ``None`` checks nothing). Both are measured
on memscope's allocator of ``device`` (the marker's, else ``--memscope-device``, else memscope's
current device) through an independent peak window, so the test's own
``reset_peak_memory_stats()`` cannot hide its peak; on memscope's simulated device
(``device="sim:8GiB"``) the figures are exact and the same on every machine. A ``cuda`` device
that PyTorch's own allocator serves (memscope is not PyTorch's allocator) is measured with
``torch.cuda.max_memory_allocated`` instead, whose peak the plugin resets at the test's start.

Without ``--memscope`` the markers are accepted and nothing is measured. With it, the end of the
session lists each marked test's peak and growth. Installed, the plugin registers itself
(entry point ``pytest11``); from a source tree, ``-p memscope.pytest_plugin`` loads it.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Optional, Union

import pytest

from . import _api
from ._memscope import format_bytes, parse_size

Size = Union[int, str, None]

__all__ = ["Measured", "limit_bytes"]


@dataclass
class Measured:
    """One test's figures: bytes above what was allocated when it started."""

    nodeid: str
    device: str
    peak: int
    growth: int
    peak_limit: Optional[int]
    growth_limit: Optional[int]

    def problems(self) -> list[str]:
        out = []
        if self.peak_limit is not None and self.peak > self.peak_limit:
            out.append(f"peak {format_bytes(self.peak)} is above the limit "
                       f"{format_bytes(self.peak_limit)}")
        if self.growth_limit is not None and self.growth > self.growth_limit:
            out.append(f"the test left {format_bytes(self.growth)} allocated on {self.device}, "
                       f"more than growth={format_bytes(self.growth_limit)}")
        return out


def limit_bytes(value: Size, what: str) -> Optional[int]:
    """A limit as the marker takes it: bytes, a size with a unit ("2GiB"), or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise pytest.UsageError(f"memscope marker: {what}= takes bytes or a size such as "
                                f"\"2GiB\", not {value!r}")
    if isinstance(value, str):
        return int(parse_size(value))
    if value < 0:
        raise pytest.UsageError(f"memscope marker: {what}={value} is negative")
    return value


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("memscope", "memory peaks and growth of tests (memscope)")
    group.addoption("--memscope", action="store_true", default=False,
                    help="check @pytest.mark.memscope(peak=..., growth=...) and list the figures")
    group.addoption("--memscope-device", default=None,
                    help="the device measured when the marker names none (e.g. sim:8GiB, "
                         "cuda:0, host; default: memscope's current device)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "memscope(peak=None, growth=None, device=None): with --memscope, fail when "
        "the test's peak or the memory it leaves allocated exceeds these sizes")
    config.stash[_RESULTS] = []


_RESULTS = pytest.StashKey[list[Measured]]()


class _Window:
    """The test's peak and growth on one device, through memscope's allocator or, for a CUDA
    device PyTorch's own allocator serves, through torch.cuda's counters."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.torch_index = self._torch_device(device)
        if self.torch_index is not None:
            import torch

            torch.cuda.synchronize(self.torch_index)
            self.start = int(torch.cuda.memory_allocated(self.torch_index))
            torch.cuda.reset_peak_memory_stats(self.torch_index)
        else:
            self.allocator = _api.default_allocator(device)
            self.start = self.allocator.memory_allocated()
            self.scope = self.allocator.peak_scope()

    @staticmethod
    def _torch_device(device: str) -> Optional[int]:
        index = _api._cuda_index(_api._spec(device))
        if index is None:
            return None
        import sys

        torch = sys.modules.get("torch")
        if torch is None or not torch.cuda.is_available():
            return None
        from . import torch as memscope_torch

        return None if memscope_torch.is_allocator() else index

    def close(self) -> tuple[int, int]:
        """(peak, growth) in bytes above the start."""
        if self.torch_index is not None:
            import torch

            torch.cuda.synchronize(self.torch_index)
            peak = int(torch.cuda.max_memory_allocated(self.torch_index))
            end = int(torch.cuda.memory_allocated(self.torch_index))
        else:
            self.scope.close()
            peak = self.scope.peak.allocated_bytes
            end = self.allocator.memory_allocated()
        return max(0, peak - self.start), end - self.start


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    marker = item.get_closest_marker("memscope")
    if marker is None or not item.config.getoption("--memscope"):
        return (yield)
    unknown = set(marker.kwargs) - {"peak", "growth", "device"}
    if marker.args or unknown:
        raise pytest.UsageError(f"{item.nodeid}: memscope marker takes peak=, growth= and "
                                f"device= by keyword (got {marker.args or sorted(unknown)})")
    peak_limit = limit_bytes(marker.kwargs.get("peak"), "peak")
    growth_limit = limit_bytes(marker.kwargs.get("growth"), "growth")
    device = marker.kwargs.get("device") or item.config.getoption("--memscope-device") or None
    window = _Window(device if device is not None else _api.current_device())
    try:
        result = yield
    finally:
        peak, growth = window.close()
    measured = Measured(item.nodeid, window.device, peak, growth, peak_limit, growth_limit)
    item.config.stash[_RESULTS].append(measured)
    problems = measured.problems()
    if problems:
        pytest.fail("memscope: " + "; ".join(problems), pytrace=False)
    return result


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int,
                            config: pytest.Config) -> None:
    results = config.stash.get(_RESULTS, [])
    if not config.getoption("--memscope") or not results:
        return
    terminalreporter.section("memscope: memory of the marked tests")
    width = max(len(r.nodeid) for r in results)
    for r in results:
        verdict = "FAILED" if r.problems() else "ok"
        terminalreporter.write_line(
            f"{r.nodeid:<{width}}  peak {format_bytes(r.peak):>11}  growth "
            f"{format_bytes(r.growth):>11}  on {r.device}  {verdict}")
