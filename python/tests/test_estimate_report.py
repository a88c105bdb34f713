"""memscope.estimate rendered through the library's report model (Estimate.report()), and the
command line's module under a private name so that `memscope.estimate` stays the function.
About 2 s (two small captures)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable

import pytest

import memscope

torch = pytest.importorskip("torch")


def workload(batch: int) -> Callable[[], None]:
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10)).cuda()
    opt = torch.optim.AdamW(model.parameters())

    def step() -> None:
        model(torch.randn(batch, 64, device="cuda")).logsumexp(-1).mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def test_the_report_holds_the_figures_the_series_and_the_steps() -> None:
    e = memscope.estimate(workload, batch=16, steps=3, capacity="1GiB")
    r = e.report()
    assert isinstance(r, memscope.Report)
    assert dict(r.summary)["peak allocated (last step)"] == memscope.format_bytes(
        e.peak_allocated)
    categories = r.tables[0]
    assert categories.columns == ["category", "bytes", "share"]
    assert [row[0] for row in categories.rows] == [k for k, v in e.by_category.items() if v]
    allocated, reserved = r.series
    assert len(allocated.bytes) == len(e.series) == len(reserved.bytes)
    assert max(allocated.bytes) >= e.peak_allocated and r.peak is not None
    assert r.peak.bytes == e.peak_allocated == allocated.bytes[int(r.peak.t)]
    assert [b.label for b in r.bands] == ["step 1", "step 2", "step 3"]
    assert e.explain() == r.to_text() and "not modelled" in e.explain()
    envelope = json.loads(r.to_json())
    assert envelope["format"] == "memscope-report"
    again = memscope.Report.from_json(r.to_json())
    assert again.to_text() == r.to_text()
    page = r.to_html()
    assert "live at the last step" in page and "by module" in page


def test_importing_the_command_line_leaves_memscope_estimate_the_function() -> None:
    code = ("import importlib, memscope; importlib.import_module('memscope._estimate_command');"
            "print(callable(memscope.estimate), type(memscope.estimate).__name__)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True)
    assert out.stdout.split() == ["True", "function"]
    gone = subprocess.run([sys.executable, "-c", "import memscope.estimate"],
                          capture_output=True, text=True, env=env)
    assert gone.returncode != 0 and "memscope.estimate" in gone.stderr
