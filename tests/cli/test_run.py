"""End-to-end tests of `memscope run` on real processes: a C++ child (run_child.cpp) allocates
and touches known amounts and writes the VmHWM the kernel reports for it to a file; memscope's
recording must hold the same peak within 1 MiB. Also exit codes, signal forwarding, stage marks
and malformed arguments.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import BUILD_DIR, CLI, MiB, memscope

RUN_CHILD = Path(
    os.environ.get("MEMSCOPE_RUN_CHILD", BUILD_DIR / "tests" / "cli" / "memscope_run_child"))

pytestmark = pytest.mark.skipif(not RUN_CHILD.exists(),
                                reason=f"{RUN_CHILD} is not built (target memscope_run_child)")


def self_report(path: Path) -> tuple[int, int]:
    """The "pid VmHWM" line a child wrote about itself."""
    pid, hwm = path.read_text().split()
    return int(pid), int(hwm)


def record_of(path: Path) -> dict:
    record = json.loads(path.read_text())
    assert record["format"] == "memscope-run"
    assert record["version"] == 1
    return record


def process(record: dict, pid: int) -> dict:
    found = [p for p in record["processes"] if p["pid"] == pid]
    assert found, f"pid {pid} not in {[p['pid'] for p in record['processes']]}"
    return found[-1]


def test_peak_of_a_child_that_allocates_and_frees_is_its_vmhwm(artifacts: Path) -> None:
    out = artifacts / "hwm.txt"
    out.unlink(missing_ok=True)
    result = memscope("run", "--json", artifacts / "run.json", "--", RUN_CHILD, "alloc", "96",
                      out, check=True)
    pid, hwm = self_report(out)
    assert hwm > 96 * MiB
    record = record_of(artifacts / "run.json")
    child = process(record, pid)
    assert abs(child["peak_rss"] - hwm) <= MiB, (child, hwm)
    assert child["peak_rss_source"] == "wait4"  # memscope reaped it: the kernel's exact figure
    assert child["exit_code"] == 0
    assert record["exit_code"] == 0 and record["child_exit_code"] == 0
    assert record["command"] == [str(RUN_CHILD), "alloc", "96", str(out)]
    # The summary names the process with its peak and says the tree figure is sampled.
    assert str(pid) in result.stdout
    assert "sampled every 100 ms" in result.stdout
    assert record["gpu_status"]  # "nvml" or why not


# How memscope finds the tree: down through /proc/<pid>/task/<tid>/children, or (kernels without
# them) by reading every process's parent.
SCANS = pytest.mark.parametrize("scan", [{}, {"MEMSCOPE_RUN_FULL_SCAN": "1"}],
                                ids=["children-files", "full-scan"])


@SCANS
def test_every_worker_of_a_forking_child_has_its_own_peak(artifacts: Path,
                                                          scan: dict[str, str]) -> None:
    for old in artifacts.glob("worker-*"):
        old.unlink()
    workers, base, hold_ms, interval_ms = 3, 24, 600, 50
    result = memscope("run", "--interval", interval_ms, "--json", artifacts / "run.json", "--",
                      RUN_CHILD, "workers", base, workers, artifacts, hold_ms, check=True,
                      env=scan)
    record = record_of(artifacts / "run.json")
    for i in range(workers):
        pid, hwm = self_report(artifacts / f"worker-{i}")
        assert hwm > base * (i + 1) * MiB
        worker = process(record, pid)
        assert abs(worker["peak_rss"] - hwm) <= MiB, (i, worker["peak_rss"], hwm)
        assert worker["ppid"] == process(record, worker["ppid"])["pid"]  # a child of the child
        assert worker["t"] and len(worker["t"]) == len(worker["rss"])
        assert str(pid) in result.stdout
    # The parent reaped its workers: wait4's ru_maxrss for it holds their peaks, which must not
    # be taken for its own.
    parent = process(record, record["processes"][0]["pid"])
    assert parent["command"].startswith(str(RUN_CHILD))
    assert parent["peak_rss"] < base * MiB, parent
    # The tree was sampled while the workers lived, and its peak holds at least the largest.
    assert len(record["t"]) == len(record["tree_rss"]) >= 3
    largest = max(self_report(artifacts / f"worker-{i}")[1] for i in range(workers))
    assert record["peak_tree_rss"] >= largest - MiB
    assert record["peak_tree_rss"] == max(record["tree_rss"])


@SCANS
def test_an_orphaned_grandchild_is_adopted_and_reaped(artifacts: Path,
                                                      scan: dict[str, str]) -> None:
    out = artifacts / "orphan.txt"
    out.unlink(missing_ok=True)
    memscope("run", "--json", artifacts / "run.json", "--", RUN_CHILD, "orphan", "64", out,
             "300", check=True, env=scan)
    pid, hwm = self_report(out)
    grandchild = process(record_of(artifacts / "run.json"), pid)
    # memscope was its subreaper: it reaped it and got the kernel's figure from wait4.
    assert grandchild["peak_rss_source"] == "wait4"
    assert grandchild["exit_code"] == 0
    assert abs(grandchild["peak_rss"] - hwm) <= MiB


def test_stage_marks_from_a_cpp_child(artifacts: Path) -> None:
    out = artifacts / "marks.txt"
    out.unlink(missing_ok=True)
    result = memscope("run", "--json", artifacts / "run.json", "--", RUN_CHILD, "marks", "48",
                      out, check=True)
    pid, hwm = self_report(out)
    record = record_of(artifacts / "run.json")
    kinds = [(m["kind"], m["stage"], m["pid"]) for m in record["marks"]]
    assert kinds == [("begin", "load", pid), ("end", "load", pid)]
    end = record["marks"][1]
    assert end["metrics"] == {"cpu_peaked_delta": 48 * MiB}
    assert abs(end["hwm"] - hwm) <= MiB
    assert 0 <= record["marks"][0]["t"] <= end["t"] <= record["duration"]
    [stage] = record["stages"]
    assert (stage["name"], stage["pid"]) == ("load", pid)
    assert stage["begin"] == record["marks"][0]["t"] and stage["end"] == end["t"]
    assert stage["metrics"] == {"cpu_peaked_delta": 48 * MiB}
    assert any("1 line on the marks pipe was not a stage mark" in note for note in record["notes"])
    assert "load" in result.stdout and "cpu_peaked_delta 48.00 MiB" in result.stdout


def test_exit_codes_pass_through() -> None:
    assert memscope("run", "--", RUN_CHILD, "exit", "3").returncode == 3
    assert memscope("run", "--", RUN_CHILD, "exit", "0").returncode == 0
    killed = memscope("run", "--", RUN_CHILD, "kill", str(int(signal.SIGKILL)))
    assert killed.returncode == 128 + signal.SIGKILL
    assert "killed by signal 9" in killed.stdout


def test_a_command_that_cannot_run(tmp_path: Path) -> None:
    missing = memscope("run", "--", "memscope-no-such-command-xyz")
    assert missing.returncode == 127
    assert "memscope-no-such-command-xyz" in missing.stderr and "not found" in missing.stderr
    not_executable = tmp_path / "data.txt"
    not_executable.write_text("not a program\n")
    denied = memscope("run", "--", not_executable)
    assert denied.returncode == 126
    assert str(not_executable) in denied.stderr


def test_sigterm_to_memscope_is_forwarded(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    env = dict(os.environ, MEMSCOPE_NO_PROGRESS="1")
    runner = subprocess.Popen([str(CLI), "run", "--", str(RUN_CHILD), "trap", "42", str(ready)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        while not ready.exists():  # waits for the child's handler; no time is asserted
            assert runner.poll() is None, runner.communicate()
            time.sleep(0.02)
        runner.send_signal(signal.SIGTERM)
        stdout, _ = runner.communicate(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 42
    assert "exit 42" in stdout


@pytest.mark.parametrize(("args", "named"), [
    ([], "no command"),
    (["--interval", "0"], "--interval"),
    (["--interval", "-5"], "--interval"),
    (["--interval", "often"], "--interval"),
    (["--json", "/nonexistent-folder-xyz/run.json"], "--json"),
    (["--html", "/nonexistent-folder-xyz/run.html"], "--html"),
])
def test_malformed_arguments_exit_125_naming_the_option(args: list[str], named: str,
                                                        tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    command = [] if named == "no command" else ["--", sys.executable, "-c",
                                                 f"open({str(marker)!r}, 'w')"]
    result = memscope("run", *args, *command)
    assert result.returncode == 125, result
    assert named in result.stderr
    assert not marker.exists()  # the command never started


def test_arguments_after_the_command_belong_to_it(artifacts: Path) -> None:
    # Without '--', options after the command's name are the command's own.
    result = memscope("run", "--quiet", sys.executable, "-c",
                      "import sys; print(sys.argv[1:])", "--interval", "5", check=True)
    assert "['--interval', '5']" in result.stdout
    assert "Processes" not in result.stdout  # --quiet


def test_the_recording_round_trips(artifacts: Path) -> None:
    """The JSON holds every field of watched_run.hpp with its type; memscope report reads it back
    through run_record_from_json (when report is written), and a damaged one is refused naming
    the field."""
    out = artifacts / "hwm.txt"
    memscope("run", "--quiet", "--json", artifacts / "run.json", "--", RUN_CHILD, "alloc", "8",
             out, check=True)
    record = record_of(artifacts / "run.json")
    top = {"command": list, "start_unix": float, "duration": float, "interval": float,
           "exit_code": int, "gpu_status": str, "host_total": int, "cgroup_limit": int,
           "t": list, "tree_rss": list, "tree_gpu": list, "gpus": list, "processes": list,
           "marks": list, "stages": list, "peak_tree_rss": int, "peak_tree_rss_t": float,
           "notes": list}
    for key, kind in top.items():
        assert isinstance(record[key], kind), (key, record[key])
    assert record["interval"] == pytest.approx(0.1)
    assert record["host_total"] > 0
    assert record["start_unix"] > 1.6e9
    for p in record["processes"]:
        for key, kind in {"pid": int, "ppid": int, "command": str, "start": float,
                          "end": float, "peak_rss": int, "peak_rss_source": str,
                          "peak_gpu": int, "t": list, "rss": list, "gpu": list}.items():
            assert isinstance(p[key], kind), (key, p)
        assert p["peak_rss_source"] in {"VmHWM", "wait4", "marks", "sampled", ""}
    # Read back by the command (report, when it reads run recordings); a damaged field is
    # refused with its name.
    damaged = dict(record)
    damaged["processes"] = [dict(record["processes"][0], peak_rss="big")]
    (artifacts / "damaged.json").write_text(json.dumps(damaged))
    report = memscope("report", artifacts / "run.json")
    if report.returncode == 0:
        bad = memscope("report", artifacts / "damaged.json")
        assert bad.returncode == 3
        assert "processes[0].peak_rss" in bad.stderr


@SCANS
def test_the_run_ends_with_the_command_and_leaves_descendants_running(
        artifacts: Path, scan: dict[str, str]) -> None:
    # The sleeper must not hold our stdout open, or reading it would wait for the sleeper.
    code = ("import subprocess; p = subprocess.Popen(['sleep', '60'], "
            "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); print(p.pid, flush=True)")
    result = memscope("run", "--json", artifacts / "run.json", "--", sys.executable, "-c", code,
                      check=True, env=scan)
    sleeper_pid = int(result.stdout.split()[0])
    try:
        sleeper = process(record_of(artifacts / "run.json"), sleeper_pid)
        assert sleeper["end"] == -1  # still running when the command exited
        assert sleeper["peak_rss_source"] == "VmHWM" and sleeper["peak_rss"] > 0
        assert "running" in result.stdout
    finally:
        os.kill(sleeper_pid, signal.SIGKILL)


def test_html_report_is_written(artifacts: Path) -> None:
    html = artifacts / "run.html"
    html.unlink(missing_ok=True)
    memscope("run", "--quiet", "--html", html, "--", RUN_CHILD, "alloc", "16",
             artifacts / "hwm.txt", check=True)
    text = html.read_text()
    assert text.lstrip().lower().startswith("<!doctype html")
    assert "memscope_run_child" in text  # the command is named in the page
