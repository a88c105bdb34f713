"""`memscope estimate`: the command execs `python3 -m memscope.estimate` (the capture needs
PyTorch); end to end on a small step without a GPU, with --json and --html, and the errors of
a missing interpreter and of a step the capture cannot run."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import BUILD_DIR, memscope

pytest.importorskip("torch")
# The command runs the Python package of its build tree; sanitizer builds have none.
pytestmark = pytest.mark.skipif(
    not (BUILD_DIR / "python" / "memscope" / "__init__.py").exists(),
    reason=f"{BUILD_DIR} has no Python package (built without the extension)")

WORKLOAD = textwrap.dedent("""
    import torch

    def workload(batch):
        model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                    torch.nn.Linear(256, 64)).cuda()
        opt = torch.optim.AdamW(model.parameters())

        def step():
            model(torch.randn(batch, 64, device="cuda")).square().mean().backward()
            opt.step()
            opt.zero_grad()

        return step

    def reads_a_value(batch):
        def step():
            print(torch.ones(batch, device="cuda").sum().item())
        return step
""")


def test_estimate_writes_json_and_html(tmp_path: Path) -> None:
    script = tmp_path / "work.py"
    script.write_text(WORKLOAD)
    out, page = tmp_path / "e.json", tmp_path / "e.html"
    r = memscope("estimate", f"{script}:workload", "--batch", "8", "--steps", "2",
                 "--capacity", "1GiB", "--json", out, "--html", page,
                 env={"MEMSCOPE_PYTHON": sys.executable})
    assert r.returncode == 0, r.stderr
    assert "peak allocated (last step)" in r.stdout and "not modelled" in r.stdout
    figures = json.loads(out.read_text())["estimate"]
    assert figures["fits"] is True and figures["peak_allocated"] > 0
    assert sum(figures["by_category"].values()) == figures["peak_allocated"]
    assert page.read_text().lstrip().lower().startswith("<!doctype html")


def test_estimate_names_the_op_it_cannot_capture(tmp_path: Path) -> None:
    script = tmp_path / "work.py"
    script.write_text(WORKLOAD)
    r = memscope("estimate", f"{script}:reads_a_value", "--batch", "2",
                 env={"MEMSCOPE_PYTHON": sys.executable})
    assert r.returncode == 1 and "aten._local_scalar_dense" in r.stderr


def test_estimate_without_python_says_what_is_missing() -> None:
    r = memscope("estimate", "x.py:f", env={"MEMSCOPE_PYTHON": "/nonexistent/python3"})
    assert r.returncode == 2
    assert "cannot run /nonexistent/python3" in r.stderr and "PyTorch" in r.stderr


def test_help_is_the_modules() -> None:
    r = memscope("estimate", "--help", env={"MEMSCOPE_PYTHON": sys.executable})
    assert r.returncode == 0 and "SCRIPT.py:FUNCTION" in r.stdout and "--max-batch" in r.stdout
