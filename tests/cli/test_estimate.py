"""`memscope estimate`: the command execs `python3 -m memscope._estimate_command` (the capture
needs PyTorch); end to end on a small step without a GPU, with --json and --html, and the
errors of a missing interpreter and of a step the capture cannot run; the exit codes of
docs/cli.md's table; outputs checked before the capture, never an input nor another output,
written whole."""

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

    def exits(batch):
        def step():
            raise SystemExit(0)
        return step
""")
PY = {"MEMSCOPE_PYTHON": sys.executable}


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
    assert r.returncode == 3 and "aten._local_scalar_dense" in r.stderr


def test_estimate_without_python_says_what_is_missing() -> None:
    r = memscope("estimate", "x.py:f", env={"MEMSCOPE_PYTHON": "/nonexistent/python3"})
    assert r.returncode == 2
    assert "cannot run /nonexistent/python3" in r.stderr and "PyTorch" in r.stderr


def test_help_is_the_modules() -> None:
    r = memscope("estimate", "--help", env={"MEMSCOPE_PYTHON": sys.executable})
    assert r.returncode == 0 and "SCRIPT.py:FUNCTION" in r.stdout and "--max-batch" in r.stdout


def script_in(tmp_path: Path, text: str = WORKLOAD, name: str = "work.py") -> Path:
    script = tmp_path / name
    script.write_text(text)
    return script


@pytest.mark.parametrize("option", ["--json", "--html", "--snapshot"])
def test_an_output_that_names_the_script_is_refused(tmp_path: Path, option: str) -> None:
    # Under 1 s each: refused before Python starts.
    script = script_in(tmp_path)
    before = script.read_bytes()
    r = memscope("estimate", f"{script}:workload", option, script, env=PY)
    assert r.returncode == 2, r.stderr
    assert f"{option} '{script}' is the input SCRIPT" in r.stderr
    assert script.read_bytes() == before


def test_two_outputs_that_are_one_file_are_refused(tmp_path: Path) -> None:
    # Under 1 s.
    script = script_in(tmp_path)
    out = tmp_path / "x"
    r = memscope("estimate", f"{script}:workload", "--json", out, f"--html={out}", env=PY)
    assert r.returncode == 2 and "--json and --html are one file" in r.stderr
    assert not out.exists()


def test_an_output_that_cannot_be_written_fails_before_the_capture(tmp_path: Path) -> None:
    # Under 1 s: the script (which would leave a mark when loaded) never runs.
    mark = tmp_path / "loaded"
    script = script_in(tmp_path, f"open({str(mark)!r}, 'w').close()\n" + WORKLOAD)
    r = memscope("estimate", f"{script}:workload", "--max-batch", "--json",
                 tmp_path / "nodir" / "x.json", env=PY)
    assert r.returncode == 4 and "does not exist" in r.stderr
    assert not mark.exists()


def test_a_failed_html_leaves_the_json_as_it_was(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # About 3 s: one capture; the page's renderer (memscope.Report.to_html) is made to fail.
    from memscope import _estimate_report
    from memscope._estimate import main

    real = _estimate_report.estimate_report

    class PageFails:
        def __init__(self, report: object) -> None:
            self.report = report

        def __getattr__(self, name: str) -> object:
            return getattr(self.report, name)

        def to_html(self) -> str:
            raise RuntimeError("cannot render")

    monkeypatch.setattr(_estimate_report, "estimate_report", lambda e: PageFails(real(e)))
    script = script_in(tmp_path)
    out = tmp_path / "e.json"
    out.write_text("old")
    code = main([f"{script}:workload", "--batch", "2", "--steps", "1", "--capacity", "1GiB",
                 "--json", str(out), "--html", str(tmp_path / "e.html")])
    assert code == 5
    assert out.read_text() == "old" and not (tmp_path / "e.html").exists()


@pytest.mark.parametrize("case, args, code, message", [
    ("missing script", ["{dir}/none.py:workload"], 3, "no such file"),
    ("missing function", ["{script}:nothing"], 3, "has no function 'nothing'"),
    ("no function given", ["{script}"], 2, "SCRIPT.py:FUNCTION"),
    ("syntax error", ["{broken}:workload"], 3, "SyntaxError"),
    ("import error", ["{imports}:workload"], 3, "ModuleNotFoundError"),
    ("sys.exit at load", ["{exits}:workload"], 3, "sys.exit(4)"),
    ("sys.exit in the step", ["{script}:exits"], 3, "sys.exit(0)"),
    ("batch 0", ["{script}:workload", "--batch", "0"], 2, "--batch: must be at least 1"),
    ("bad config", ["{script}:workload", "--config", "bogus:1"], 2, "bogus"),
    ("bare capacity", ["{script}:workload", "--capacity", "24"], 2, "has no unit"),
    ("unknown card", ["{script}:workload", "--capacity", "h100-90gb"], 2, "h100-80gb, h200"),
    ("unknown device", ["{script}:workload", "--device", "h900"], 2, "h100-80gb, h200"),
    ("the card --device names", ["{script}:workload", "--device", "t4", "--steps", "1",
                                 "--batch", "2"], 0, ""),
    ("a card as --capacity", ["{script}:workload", "--capacity", "h200", "--steps", "1",
                              "--batch", "2"], 0, ""),
    ("batch too large", ["{script}:workload", "--batch", str(1 << 40)], 2, "more than any GPU"),
    ("does not fit", ["{script}:workload", "--capacity", "1MiB", "--steps", "1"], 1, ""),
])
def test_exit_codes_follow_the_table(tmp_path: Path, case: str, args: list[str], code: int,
                                     message: str) -> None:
    # Up to 3 s each (a capture where the case gets that far).
    paths = {
        "dir": tmp_path, "script": script_in(tmp_path),
        "broken": script_in(tmp_path, "def workload(batch)\n", "broken.py"),
        "imports": script_in(tmp_path, "import no_such_module_44\n", "imports.py"),
        "exits": script_in(tmp_path, "import sys\nsys.exit(4)\n", "exits.py"),
    }
    r = memscope("estimate", *[a.format(**paths) for a in args], env=PY)
    assert r.returncode == code, (case, r.stderr)
    assert message in r.stderr, (case, r.stderr)
    if code > 1:
        assert r.stderr.startswith("memscope estimate: error: ") or "usage:" in r.stderr


def test_json_carries_the_envelope_and_report_shows_it(tmp_path: Path) -> None:
    # About 3 s: one capture that does not fit (exit 1, as replay --capacity), then report.
    script = script_in(tmp_path)
    out = tmp_path / "e.json"
    r = memscope("estimate", f"{script}:workload", "--steps", "1", "--capacity", "1MiB",
                 "--json", out, env=PY)
    assert r.returncode == 1, r.stderr
    saved = json.loads(out.read_text())
    assert (saved["format"], saved["version"]) == ("memscope-estimate", 1)
    assert saved["estimate"]["fits"] is False
    shown = memscope("report", out)
    assert shown.returncode == 0, shown.stderr
    assert "peak allocated (last step)" in shown.stdout
