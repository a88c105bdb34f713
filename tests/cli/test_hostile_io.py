"""The memscope command against hostile inputs and outputs (issue 29, items 3, 4, 6, 7, 8).

Each test failed on the code before the fix: a non-UTF-8 command line or a frame name with a
lone surrogate lost the recording (exit 125 / 5), `| head -1` killed `memscope run` before it
wrote its files, outputs replaced FIFOs, links and inputs and lost a file's mode, inputs were
read twice (pipes failed), blocked forever (a FIFO without a writer), or read without a cap
(/dev/zero), a "format" that is not a string exited 5, and --device -1 was taken as the default.
"""

from __future__ import annotations

import json
import os
import pickle
import stat
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import CLI, memscope

RMM_LOG = (
    "Thread,Time,Action,Pointer,Size,Stream\n"
    "1,08:00:00.000001,allocate,0x7f0000000000,1048576,0x0\n"
    "1,08:00:00.000002,allocate,0x7f0000200000,2097152,0x0\n"
    "1,08:00:00.000003,free,0x7f0000000000,1048576,0x0\n"
)


@pytest.fixture
def rmm_log(tmp_path: Path) -> Path:
    path = tmp_path / "trace.log"
    path.write_text(RMM_LOG)
    return path


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["MEMSCOPE_NO_PROGRESS"] = "1"
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS", ""), "detect_leaks=0"]))
    return env


# ---- 3: memscope run keeps its recording -------------------------------------------------


def test_run_writes_a_command_line_that_is_not_utf8(tmp_path: Path) -> None:
    out, page = tmp_path / "run.json", tmp_path / "run.html"
    result = subprocess.run([os.fsencode(CLI), b"run", b"--quiet", b"--no-gpu", b"--json",
                             os.fsencode(out), b"--html", os.fsencode(page), b"--", b"sh", b"-c",
                             b"sleep 0.5", b"caf\xe9-\xff"],
                            capture_output=True, env=_env(), timeout=120)
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    data = json.loads(out.read_text())
    # The bytes come back with Python's surrogateescape.
    commands = [os.fsencode(" ".join(p["command"]) if isinstance(p["command"], list)
                            else p["command"]) for p in data["processes"]]
    assert any(b"caf\xe9-\xff" in c for c in commands), commands
    assert [os.fsencode(a) for a in data["command"]][-1] == b"caf\xe9-\xff"
    assert page.stat().st_size > 0
    # memscope reads its own escapes back: the bytes reach the report and the diff's JSON.
    report = subprocess.run([str(CLI), "report", str(out)], capture_output=True, env=_env(),
                            timeout=120)
    assert report.returncode == 0 and b"caf\xe9-\xff" in report.stdout, report.stderr
    diff = tmp_path / "diff.json"
    result = subprocess.run([str(CLI), "diff", str(out), str(out), "--json", str(diff)],
                            capture_output=True, env=_env(), timeout=120)
    assert result.returncode == 0, result.stderr
    assert r"caf\udce9-\udcff" in diff.read_text()


def test_run_piped_into_head_still_writes_its_files(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    script = (f"'{CLI}' run --no-gpu --json '{out}' -- sh -c 'echo one; sleep 0.3' "
              "| head -1; echo \"status ${PIPESTATUS[0]}\"")
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                            env=_env(), timeout=120)
    assert result.stdout.splitlines()[0] == "one"
    assert result.stdout.splitlines()[-1] == "status 0", result
    assert json.loads(out.read_text())["format"] == "memscope-run"


@pytest.mark.parametrize("folder", ["locked", "/proc/self"])
def test_run_checks_an_unwritable_folder_before_the_command(tmp_path: Path, folder: str) -> None:
    # A 0500 folder stops everyone but root; /proc/self (0555, no new files) stops root too.
    locked = tmp_path / folder if folder == "locked" else Path(folder)
    if folder == "locked":
        if os.geteuid() == 0:
            pytest.skip("root may write any folder")
        locked.mkdir()
        locked.chmod(0o500)
    marker = tmp_path / "ran"
    try:
        result = memscope("run", "--json", locked / "run.json", "--", "touch", marker)
    finally:
        if folder == "locked":
            locked.chmod(0o700)
    assert result.returncode == 125 and "cannot be written" in result.stderr, result.stderr
    assert not marker.exists()


def _surrogate_trace(path: Path) -> Path:
    frame = {"filename": "/home/u/caf\udce9.py", "line": 3, "name": "grow\udc80"}
    events = [{"action": "alloc", "addr": 1 << 40, "size": 4 << 20, "stream": 0,
               "time_us": 1, "frames": [frame]}]
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [events]}, protocol=4))
    return path


def test_replay_and_diff_write_frame_names_with_lone_surrogates(tmp_path: Path) -> None:
    trace = _surrogate_trace(tmp_path / "t.pickle")
    out, page = tmp_path / "replay.json", tmp_path / "replay.html"
    # stdout shows the names as the bytes they are: read it as bytes.
    result = subprocess.run([str(CLI), "replay", str(trace), "--json", str(out), "--html",
                             str(page)], capture_output=True, env=_env(), timeout=120)
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert data["top_sites"][0]["function"].encode("utf-8", "surrogateescape") == \
        "grow\udc80".encode("utf-8", "surrogatepass")
    assert "memscope-report" in page.read_text(errors="replace")
    diff = tmp_path / "diff.json"
    result = subprocess.run([str(CLI), "diff", str(trace), str(trace), "--json", str(diff)],
                            capture_output=True, env=_env(), timeout=120)
    assert result.returncode == 0, result.stderr
    json.loads(diff.read_text())


# ---- 4: outputs never replace what is not theirs -----------------------------------------


def test_an_output_that_is_an_input_is_refused(rmm_log: Path) -> None:
    before = rmm_log.read_bytes()
    result = memscope("replay", rmm_log, "--json", rmm_log)
    assert result.returncode == 2 and "input" in result.stderr
    assert rmm_log.read_bytes() == before
    link = rmm_log.with_name("link.log")
    link.symlink_to(rmm_log)
    assert memscope("report", link, "--html", rmm_log).returncode == 2
    assert rmm_log.read_bytes() == before


def test_two_outputs_that_are_one_file_are_refused(rmm_log: Path, tmp_path: Path) -> None:
    out = tmp_path / "same"
    result = memscope("replay", rmm_log, "--json", out, "--html", out)
    assert result.returncode == 2 and "--json and --html" in result.stderr
    assert not out.exists()


def test_outputs_write_into_a_fifo_and_through_a_link_and_keep_the_mode(
        rmm_log: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    memscope("replay", rmm_log, "--json", fifo, check=True)
    reader.join(30)
    assert stat.S_ISFIFO(fifo.stat().st_mode) and json.loads(got[0])["format"] == "memscope-replay"

    real = tmp_path / "real.json"
    real.write_text("old")
    real.chmod(0o600)
    link = tmp_path / "link.json"
    link.symlink_to(real)
    memscope("replay", rmm_log, "--json", link, check=True)
    assert link.is_symlink() and json.loads(real.read_text())["format"] == "memscope-replay"
    assert stat.S_IMODE(real.stat().st_mode) == 0o600


# ---- 6: inputs are read once, with a cap, and named -------------------------------------


def test_a_pipe_is_read_once(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()

    def feed() -> None:
        with os.fdopen(write_end, "wb") as w:
            w.write(RMM_LOG.encode())

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        result = subprocess.run([str(CLI), "report", f"/dev/fd/{read_end}"], pass_fds=[read_end],
                                capture_output=True, text=True, env=_env(), timeout=120)
    finally:
        os.close(read_end)
        writer.join()
    assert result.returncode == 0, result.stderr
    assert "3.00 MiB" in result.stdout or "2.00 MiB" in result.stdout, result.stdout


def test_stdin_is_read() -> None:
    result = subprocess.run([str(CLI), "report", "/dev/stdin"], input=RMM_LOG,
                            capture_output=True, text=True, env=_env(), timeout=120)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("path,words", [("/dev/zero", "character device"),
                                        ("/tmp", "folder")])
def test_what_is_not_a_file_is_named(path: str, words: str) -> None:
    result = memscope("report", path, timeout=30)
    assert result.returncode == 3 and words in result.stderr, result.stderr


def test_a_proc_file_is_read_not_called_empty() -> None:
    result = memscope("report", "/proc/self/status")
    assert result.returncode == 3 and "empty" not in result.stderr, result.stderr


def test_a_fifo_without_a_writer_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    start = time.monotonic()
    result = memscope("diff", fifo, fifo, timeout=60)
    assert result.returncode == 3 and "FIFO" in result.stderr, result.stderr
    assert time.monotonic() - start < 30


# ---- 7, 8: typed errors and checked options ----------------------------------------------


@pytest.mark.parametrize("content", ['{"format": ["memscope-run"], "version": 1}',
                                     '{"format": 5, "version": 1, "rows": {}}',
                                     '{"format": null}'])
def test_a_format_that_is_not_a_string_is_not_an_internal_error(tmp_path: Path,
                                                                content: str) -> None:
    path = tmp_path / "odd.json"
    path.write_text(content)
    assert memscope("report", path).returncode in (0, 3)
    assert memscope("diff", path, path).returncode in (0, 3)


@pytest.mark.parametrize("command", ["replay", "diff"])
def test_a_negative_device_is_refused(command: str, rmm_log: Path) -> None:
    args = [rmm_log] if command == "replay" else [rmm_log, rmm_log]
    result = memscope(command, *args, "--device", "-1")
    assert result.returncode == 2 and "--device" in result.stderr


def test_saved_empty_metrics_are_reported(tmp_path: Path) -> None:
    memscope_py = pytest.importorskip("memscope")
    memscope_py.save_metrics("eval", {}, tmp_path)
    result = memscope("report", tmp_path / "eval_results.json")
    assert result.returncode == 0, result.stderr


# ---- issue 44, item 11: saved metrics through a pipe, a FIFO, stdin -----------------------

METRICS = '{"train_loss": NaN, "train_mem_gpu_alloc_delta": 1048576, "train_runtime": 2.5}'
METRICS_B = '{"train_loss": 0.5, "train_mem_gpu_alloc_delta": 3145728, "train_runtime": 2.0}'


def test_metrics_through_a_pipe_are_read_once(tmp_path: Path) -> None:
    """The kind was told from the bytes, then the metrics read from the path again: a pipe was
    empty the second time ("is not a JSON object of metrics"). Python's NaN token was refused
    too. Costs well under a second."""
    read_end, write_end = os.pipe()

    def feed() -> None:
        with os.fdopen(write_end, "wb") as w:
            w.write(METRICS.encode())

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        result = subprocess.run([str(CLI), "report", f"/dev/fd/{read_end}", "--html",
                                 str(tmp_path / "m.html")], pass_fds=[read_end],
                                capture_output=True, text=True, env=_env(), timeout=120)
    finally:
        os.close(read_end)
        writer.join()
    assert result.returncode == 0, result.stderr
    assert "train_mem_gpu_alloc_delta" in result.stdout and "1.00 MiB" in result.stdout
    assert "train_mem_gpu_alloc_delta" in (tmp_path / "m.html").read_text()


def test_diff_of_metrics_from_a_fifo_and_stdin(tmp_path: Path) -> None:
    """diff A B with A a FIFO and B stdin (as `diff <(...) -` would give). Costs well under a
    second."""
    fifo = tmp_path / "a.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text(METRICS))
    writer.start()
    try:
        result = subprocess.run([str(CLI), "diff", str(fifo), "/dev/stdin", "--json",
                                 str(tmp_path / "d.json")], input=METRICS_B,
                                capture_output=True, text=True, env=_env(), timeout=120)
    finally:
        writer.join()
    assert result.returncode == 0, result.stderr
    assert "largest memory change: train_mem_gpu_alloc_delta +2.00 MiB" in result.stdout
    assert json.loads((tmp_path / "d.json").read_text())["kind"] == "metrics"
