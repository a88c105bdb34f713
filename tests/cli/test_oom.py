"""`memscope replay` and `memscope report` of a snapshot that recorded an out-of-memory error
(issue 42): the OOM explained under the replay, and a damaged OOM record refused with exit 3
naming it. The snapshot is a real OOM of memscope's allocator on a simulated device, written by
memscope's snapshot writer through the Python package. About 2 s."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest
from conftest import MiB, memscope

ms = pytest.importorskip("memscope")


def oom_snapshot(path: Path) -> Path:
    """1 GiB filled with 5 MiB blocks, three of every four freed, then 100 MiB asked for."""
    a = ms.Allocator("sim:1GiB", config="")
    a.start_recording(stacks="python")
    blocks = []
    try:
        while True:
            blocks.append(a.alloc(5 * MiB))
    except ms.OutOfMemoryError:
        pass
    for i, p in enumerate(blocks):
        if i % 4:
            a.free(p)
    with pytest.raises(ms.OutOfMemoryError):
        a.alloc(100 * MiB)
    a.dump_snapshot(path)
    return path


def test_replay_explains_the_oom(tmp_path: Path) -> None:
    snap = oom_snapshot(tmp_path / "oom.pickle")
    out = memscope("replay", snap, "--json", tmp_path / "r.json", check=True).stdout
    # The last of its two OOMs (the first: the device full), the one it was dumped for.
    assert re.search(r"OOM request +100\.00 MiB\n", out), out
    assert "(2 out-of-memory events in the trace)" in out
    assert "Live at the OOM, by site" in out
    assert re.search(r"test_oom\.py:\d+ oom_snapshot +255\.00 MiB +51\n", out), out
    assert re.search(r"expandable_segments:True +yes", out), out
    # memscope report of the saved replay prints the same text, without the trace.
    again = memscope("report", tmp_path / "r.json", check=True).stdout
    assert again == out.replace(f"replay JSON: {tmp_path / 'r.json'}\n", "")


def test_a_damaged_oom_record_exits_3_naming_it(tmp_path: Path) -> None:
    snap = oom_snapshot(tmp_path / "oom.pickle")
    data = pickle.loads(snap.read_bytes())
    events = data["device_traces"][0]
    first = next(i for i, e in enumerate(events) if e["action"] == "oom")
    events[first]["size"] = 0
    bad = tmp_path / "bad.pickle"
    bad.write_bytes(pickle.dumps(data, protocol=4))
    out = memscope("replay", bad)
    assert out.returncode == 3, out.stderr
    assert f"device_traces[0][{first}] (the out-of-memory record): the request is 0 bytes" in out.stderr
    assert str(bad) in out.stderr


def test_run_watch_sets_the_variable_import_memscope_honours(tmp_path: Path) -> None:
    """memscope run --watch DIR hands the command MEMSCOPE_WATCH=DIR (absolute); the command's
    `import memscope` honours it (python/tests/test_oom_watch.py checks what it then does)."""
    import sys

    code = "import os, memscope; print('WATCH', os.environ['MEMSCOPE_WATCH'])"
    out = memscope("run", "--quiet", "--no-gpu", "--watch", "oom-here", "--", sys.executable, "-c",
                   code, check=True)
    assert f"WATCH {Path.cwd() / 'oom-here'}" in out.stdout
