"""Stage marks under `memscope run`: a C++ child (MemoryTracker) and Python children
(memscope.Tracker), also one started by its parent with close_fds=True, whose marks reach memscope
through MEMSCOPE_MARKS_PATH. Their stages appear in the JSON (begin/end in order, nested) and in
the printed summary."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import BUILD_DIR, MiB, memscope

CHILD = Path(os.environ.get("MEMSCOPE_MARKS_CHILD",
                            BUILD_DIR / "tests" / "cli" / "memscope_marks_child"))


def python_package_reason() -> str | None:
    """Why the build's memscope package cannot be imported by a child (None when it can)."""
    probe = subprocess.run([sys.executable, "-c", "import memscope; memscope.Tracker"],
                           capture_output=True, text=True, timeout=60)
    if probe.returncode == 0:
        return None
    return "the memscope Python package is not importable here (a build without it, e.g. "\
           "sanitizers): " + probe.stderr.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def python_package() -> None:
    """Skips a test whose children import the build's memscope package where it is missing."""
    reason = python_package_reason()
    if reason:
        pytest.skip(reason)


def run_with_marks(artifacts: Path, *command: str | os.PathLike[str]) -> tuple[dict, str]:
    out = artifacts / "run.json"
    result = memscope("run", "--json", out, "--", *command, timeout=240)
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return json.loads(out.read_text()), result.stdout


def stages_of(record: dict, pid: int | None = None) -> list[dict]:
    return [s for s in record["stages"] if pid is None or s["pid"] == pid]


def assert_inside(inner: dict, outer: dict) -> None:
    assert outer["begin"] <= inner["begin"] <= inner["end"] <= outer["end"], (inner, outer)


def assert_marks_pair_up(record: dict, pid: int) -> None:
    """Each process's marks arrive in order: every end closes the innermost open begin."""
    open_stages: list[str] = []
    times = []
    for mark in record["marks"]:
        if mark["pid"] != pid:
            continue
        times.append(mark["t"])
        if mark["kind"] == "begin":
            open_stages.append(mark["stage"])
            assert mark.get("metrics") in (None, {}), mark
        else:
            assert open_stages and open_stages[-1] == mark["stage"], (open_stages, mark)
            open_stages.pop()
        assert mark["hwm"] > 0, mark
    assert not open_stages, f"stages never ended: {open_stages}"
    assert times == sorted(times)


def test_cpp_child_stages_are_recorded_nested_and_in_order(artifacts: Path) -> None:
    record, summary = run_with_marks(artifacts, CHILD, "32")
    [process] = record["processes"]
    stages = stages_of(record, process["pid"])
    assert [s["name"] for s in stages] == ["init", "load", "train", "step", "step", "eval"]
    init, load, train, step1, step2, evaluation = stages
    for s in stages:
        assert 0 <= s["begin"] <= s["end"] <= record["duration"], s
    assert init["end"] <= load["begin"] and load["end"] <= train["begin"]
    for inner in (step1, step2, evaluation):
        assert_inside(inner, train)
    assert step1["end"] <= step2["begin"] and step2["end"] <= evaluation["begin"]
    assert_marks_pair_up(record, process["pid"])

    # The end marks carry the tracker's exact figures: load keeps 32 MiB; each step touched 64
    # MiB and freed it (the host's RSS counters allow a little slack). Under ThreadSanitizer
    # every page the child touches brings a resident shadow page of its own (32 MiB kept reads
    # as 64 MiB there).
    resident_per_byte = 2 if os.environ.get("MEMSCOPE_SANITIZE") == "thread" else 1
    assert abs(load["metrics"]["cpu_alloc_delta"] - 32 * MiB * resident_per_byte) < 2 * MiB, load
    for step in (step1, step2):
        assert step["metrics"]["cpu_peaked_delta"] > 60 * MiB, step
        assert abs(step["metrics"]["cpu_alloc_delta"]) < 2 * MiB, step
    # The marks' hwm keeps the true peak (32 + 64 MiB on top of the start) although the
    # tracker's windows reset VmHWM.
    assert max(m["hwm"] for m in record["marks"]) > 96 * MiB
    assert process["peak_rss"] > 96 * MiB, process

    for name in ("init", "load", "train", "step", "eval"):
        assert any(line.split()[:2] == [name, str(process["pid"])]
                   for line in summary.splitlines()), summary


PYTHON_CHILD = textwrap.dedent("""
    import memscope
    tracker = memscope.Tracker()
    with tracker.stage("prepare"):
        kept = bytearray(16 << 20)
    with tracker.stage("fit"):
        for _ in range(2):
            with tracker.stage("epoch"):
                scratch = bytearray(32 << 20)
                del scratch
    print("child done", flush=True)
""")


def test_python_child_stages_are_recorded(artifacts: Path, python_package: None) -> None:
    record, summary = run_with_marks(artifacts, sys.executable, "-c", PYTHON_CHILD)
    assert "child done" in summary
    [process] = record["processes"]
    stages = stages_of(record, process["pid"])
    assert [s["name"] for s in stages] == ["init", "prepare", "fit", "epoch", "epoch"]
    fit = stages[2]
    for epoch in stages[3:]:
        assert_inside(epoch, fit)
        assert epoch["metrics"]["cpu_peaked_delta"] > 30 * MiB, epoch
    assert_marks_pair_up(record, process["pid"])
    assert any(line.split()[:2] == ["fit", str(process["pid"])]
               for line in summary.splitlines()), summary


# A parent without a tracker starts the child as torchrun would: close_fds=True (Popen's
# default) closes the inherited marks descriptor, and the child opens files of its own that may
# take its number; its marks must still arrive, through MEMSCOPE_MARKS_PATH.
POPEN_PARENT = textwrap.dedent("""
    import os, subprocess, sys
    fd = int(os.environ["MEMSCOPE_MARKS_FD"])
    child = '''
    import os, memscope
    fd = int(os.environ["MEMSCOPE_MARKS_FD"])
    # The inherited number is closed here; take it for a file, as a program may by chance.
    taken = os.open(os.devnull, os.O_WRONLY)
    os.dup2(taken, fd)
    tracker = memscope.Tracker()
    with tracker.stage("grandchild"):
        kept = bytearray(8 << 20)
    print("grandchild pid", os.getpid(), "fd", fd, "is", os.readlink(f"/proc/self/fd/{fd}"),
          flush=True)
    '''
    subprocess.run([sys.executable, "-c", child], check=True, close_fds=True)
""")


def test_marks_arrive_from_a_child_whose_parent_closed_the_descriptor(
        artifacts: Path, python_package: None) -> None:
    record, summary = run_with_marks(artifacts, sys.executable, "-c", POPEN_PARENT)
    line = next(line for line in summary.splitlines() if line.startswith("grandchild pid"))
    words = line.split()
    pid = int(words[2])
    assert words[-1] == os.devnull, line  # the descriptor named another file there
    stages = stages_of(record, pid)
    assert [s["name"] for s in stages] == ["init", "grandchild"], record["stages"]
    assert stages[1]["metrics"]["cpu_alloc_delta"] > 7 * MiB
    assert_marks_pair_up(record, pid)
    assert pid in [p["pid"] for p in record["processes"]]


def test_a_process_no_sample_saw_is_known_from_its_marks(
        artifacts: Path, python_package: None) -> None:
    """Regression: a grandchild that lived between two samples (reaped by its own parent) wrote
    stages, yet was missing from the processes. With a 60 s interval no sample sees it; its
    marks make it a process, with at least its tracker's peak."""
    out = artifacts / "run.json"
    result = memscope("run", "--interval", "60000", "--json", out, "--", sys.executable, "-c",
                      POPEN_PARENT, timeout=240)
    assert result.returncode == 0, result.stderr
    record = json.loads(out.read_text())
    line = next(line for line in result.stdout.splitlines() if line.startswith("grandchild pid"))
    pid = int(line.split()[2])
    process = next(p for p in record["processes"] if p["pid"] == pid)
    hwm = max(m["hwm"] for m in record["marks"] if m["pid"] == pid)
    assert process["peak_rss"] >= hwm > 8 * MiB, (process, hwm)
    assert process["end"] >= process["start"] >= 0, process


MARKS_BY_HAND = textwrap.dedent("""
    import memscope
    print("enabled", memscope.stage_marks_enabled(), flush=True)
    memscope.write_stage_mark("begin", "by-hand")
    memscope.write_stage_mark("end", "by-hand", {"tokens": 5})
    try:
        memscope.write_stage_mark("middle", "by-hand")
    except ValueError as e:
        print("refused:", e, flush=True)
""")


def test_python_write_stage_mark_by_hand(artifacts: Path, python_package: None) -> None:
    record, summary = run_with_marks(artifacts, sys.executable, "-c", MARKS_BY_HAND)
    assert "enabled True" in summary
    assert "refused: write_stage_mark: kind 'middle'" in summary
    [stage] = record["stages"]
    assert stage["name"] == "by-hand" and stage["metrics"] == {"tokens": 5}
    # Outside `memscope run` marks go nowhere, silently.
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSCOPE_MARKS_")}
    alone = subprocess.run([sys.executable, "-c", MARKS_BY_HAND], capture_output=True, text=True,
                           env=env, timeout=60, check=True)
    assert "enabled False" in alone.stdout


def page_tables(page: str) -> dict[str, list[list[str]]]:
    """The HTML page's tables: title -> the header row and the body's rows, cells unescaped."""
    tables = {}
    for title, head, body in re.findall(
            r'<h2>([^<]*)</h2>\n<div class="table-wrap"><table class="data">\n<thead><tr>(.*?)'
            r'</tr></thead>\n<tbody>\n(.*?)</tbody>', page, re.S):
        cell = r"<t[hd][^>]*>(.*?)</t[hd]>"
        rows = [[html.unescape(c) for c in re.findall(cell, head)]]
        rows += [[html.unescape(c) for c in re.findall(cell, r)] for r in body.splitlines()]
        tables[html.unescape(title)] = rows
    return tables


def terminal_table(summary: str, title: str) -> list[list[str]]:
    """The table under the line `title` of the run summary, cut into cells by its rule line."""
    lines = summary.splitlines()
    at = lines.index(title)
    rule = lines[at + 2]
    spans = [(m.start(), m.end()) for m in re.finditer(r"-+", rule)]
    rows = []
    for line in [lines[at + 1], *lines[at + 3:]]:
        if not line.startswith("  "):
            break
        rows.append([line[a:b if i + 1 < len(spans) else None].strip()
                     for i, (a, b) in enumerate(spans)])
    return rows


def test_terminal_and_page_show_the_same_tables(artifacts: Path) -> None:
    """One table value, two renderings (issue 28): the summary's tables and the page's hold the
    same titles, columns and cells."""
    html_path = artifacts / "run.html"
    result = memscope("run", "--html", html_path, "--", CHILD, "16", timeout=240)
    assert result.returncode == 0, result.stderr
    page = page_tables(html_path.read_text())
    assert set(page) == {"Processes", "Stages"}
    for title, rows in page.items():
        assert terminal_table(result.stdout, title) == rows, title
    assert len(page["Processes"]) > 1 and len(page["Stages"]) > 1  # a header and rows
