"""memscope.torch.watch: out-of-memory forensics inside the job. On the CPU the runtime is
memscope's allocator on a simulated device (a real OOM at a real capacity, recorded as it
happened); the `gpu` test drives a real PyTorch job to OOM. CPU tests cost about 2 s."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

import memscope

torch = pytest.importorskip("torch")
import memscope.torch  # noqa: E402

from test_oom_explain import CAPACITY, MiB, ask_big, fragment  # noqa: E402


def test_an_oom_writes_files_prints_the_explanation_and_is_raised_unchanged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    unwatched = memscope.Allocator(f"sim:{CAPACITY}B", config="")
    fragment(unwatched)
    expected = ask_big(unwatched)
    a = memscope.Allocator(f"sim:{CAPACITY}B", config="")
    with memscope.torch.watch(tmp_path, allocator=a) as w:
        fragment(a)  # its first OOM (the device full)
        with pytest.raises(memscope.OutOfMemoryError) as raised:
            a.alloc(100 * MiB)
    # The job's own error, unchanged: same type, message and figures as without the watch.
    assert type(raised.value) is type(expected) and str(raised.value) == str(expected)
    assert raised.value.figures == expected.figures
    # Two OOMs, two sets of files; the second never overwrote the first.
    first, second = w.files
    pid = os.getpid()
    assert first.snapshot.name == f"oom-rank0-pid{pid}.pickle"
    assert second.snapshot.name == f"oom-rank0-pid{pid}-2.pickle"
    for f in (first, second):
        assert f.snapshot.stat().st_size > 0 and f.report_json.exists()
        assert f.report_html.read_text().startswith("<!doctype html>")
    with open(second.snapshot, "rb") as fh:
        events = pickle.load(fh)["device_traces"][0]
    assert [e["size"] for e in events if e["action"] == "oom"][-1] == 100 * MiB
    err = capsys.readouterr().err
    assert err.count("memscope: out of memory on sim:1GiB") == 2
    assert "request                    100.00 MiB" in err or "100.00 MiB" in err
    assert "would have fitted with expandable_segments:True" in err
    assert second.text in err
    saved = memscope.Report.from_json(second.report_json.read_text())
    assert saved.to_text() == second.text


def test_a_later_watch_never_clobbers_files_it_did_not_write(tmp_path: Path) -> None:
    (tmp_path / f"oom-rank3-pid{os.getpid()}.pickle").write_text("someone else's")
    a = memscope.Allocator("sim:64MiB", config="")
    os.environ["RANK"] = "3"
    try:
        w = memscope.torch.watch(tmp_path, allocator=a, counterfactuals=False)
    finally:
        del os.environ["RANK"]
    with pytest.raises(memscope.OutOfMemoryError):
        a.alloc(128 * MiB)
    assert (tmp_path / f"oom-rank3-pid{os.getpid()}.pickle").read_text() == "someone else's"
    assert w.files[0].snapshot.name == f"oom-rank3-pid{os.getpid()}-2.pickle"


def test_the_observer_never_raises_from_the_allocator(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_type))
    a = memscope.Allocator("sim:64MiB", config="")
    a.add_oom_observer(lambda figures: 1 / 0)
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    memscope.torch.watch(blocked / "sub", allocator=a)  # cannot make its folder
    with pytest.raises(memscope.OutOfMemoryError):
        a.alloc(128 * MiB)
    assert seen == [ZeroDivisionError]
    assert "memscope: could not explain the out-of-memory error" in capsys.readouterr().err
    assert a.memory_allocated() == 0 and a.alloc(MiB)  # the allocator is unharmed


def test_the_environment_variable_is_honoured_by_import_memscope(tmp_path: Path) -> None:
    # Without CUDA and without an allocator there is nothing to watch: the child says so on
    # stderr and runs on (with a GPU, test_gpu_job_driven_to_oom covers what it writes).
    code = "import memscope, torch; print('ran')"
    env = dict(os.environ, MEMSCOPE_WATCH=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ran"
    if not torch.cuda.is_available():
        assert f"MEMSCOPE_WATCH={tmp_path}: not watching" in out.stderr
        assert "PyTorch sees no CUDA device" in out.stderr


@pytest.mark.gpu
def test_gpu_job_driven_to_oom(tmp_path: Path) -> None:
    """A real PyTorch job on a GPU, capped with set_per_process_memory_fraction, runs out of
    memory under watch(): the printed figures equal torch.cuda.memory_stats() at that moment,
    the snapshot opens in PyTorch's reader, and the counterfactual for expandable_segments is
    checked by rerunning the job with it. Costs about 20 s on a GPU."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device (torch.cuda.is_available() is False)")
    script = tmp_path / "job.py"
    script.write_text(f'''
import sys, torch, memscope.torch
torch.cuda.set_per_process_memory_fraction(0.05)
w = memscope.torch.watch({str(tmp_path)!r})
kept = []
blocks = []
try:
    while True:
        blocks.append(torch.empty(5 << 20, dtype=torch.uint8, device="cuda"))
except torch.OutOfMemoryError:
    pass
kept = blocks[::4]
del blocks
try:
    torch.empty(100 << 20, dtype=torch.uint8, device="cuda")
    print("FITTED")
except torch.OutOfMemoryError:
    stats = torch.cuda.memory_stats()
    print("RESERVED", stats["reserved_bytes.all.current"])
    print("FILES", w.files[-1].snapshot)
''')
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=300, env=dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=""))
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    snapshot = Path(lines["FILES"])
    with open(snapshot, "rb") as f:
        data = pickle.load(f)
    from torch.cuda import _memory_viz

    assert "raise OutOfMemoryError" in _memory_viz.trace(data)
    x = memscope.load_trace(snapshot).explain_oom(which=len(memscope.load_trace(snapshot).ooms()) - 1)
    assert x.reserved == int(lines["RESERVED"])
    fits = {c.label: c.fits for c in x.counterfactuals}["expandable_segments:True"]
    again = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           timeout=300,
                           env=dict(os.environ, PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True"))
    assert ("FITTED" in again.stdout) == fits, again.stdout + again.stderr
