"""End-to-end tests of `memscope diff`: two metrics files, two runs and two traces with known
changes, and the pairs it refuses."""

from __future__ import annotations

import html
import json
import sys
from pathlib import Path

import pytest
from conftest import MiB, memscope
from run_records import write_run

BASE = {
    "train_runtime": 100.0,
    "train_mem_cpu_alloc_delta": 100 * MiB,
    "train_mem_gpu_alloc_delta": 2048 * MiB,
    "train_mem_gpu_peaked_delta": 64 * MiB,
    "eval_mem_gpu_alloc_delta": 10 * MiB,
    "epoch": 3,
}


def write_json(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data))
    return path


def test_metrics_with_a_known_change(tmp_path: Path, artifacts: Path) -> None:
    grown = dict(BASE, train_mem_gpu_alloc_delta=BASE["train_mem_gpu_alloc_delta"] + 312 * MiB,
                 train_mem_cpu_alloc_delta=BASE["train_mem_cpu_alloc_delta"] - 20 * MiB,
                 train_runtime=110.0)
    del grown["eval_mem_gpu_alloc_delta"]
    a = write_json(tmp_path / "a_results.json", BASE)
    b = write_json(tmp_path / "b_results.json", grown)
    out_json = artifacts / "metrics-diff.json"
    out = memscope("diff", a, b, "--json", out_json, check=True).stdout
    lines = out.splitlines()
    rows = lines[lines.index(next(line for line in lines if line.strip().startswith("-----"))) + 1:]
    # Memory keys first, the largest absolute change first.
    assert rows[0].split()[:2] == ["train", "train_mem_gpu_alloc_delta"]
    assert "+312.00 MiB" in rows[0] and "+15.2%" in rows[0]
    assert rows[1].split()[1] == "train_mem_cpu_alloc_delta" and "-20.00 MiB" in rows[1]
    assert "largest memory change: train_mem_gpu_alloc_delta +312.00 MiB (+15.2%)" in out
    assert "only in A" in out
    data = json.loads(out_json.read_text())
    assert data["format"] == "memscope-diff" and data["kind"] == "metrics"
    by_key = {r["key"]: r for r in data["rows"]}
    assert by_key["train_mem_gpu_alloc_delta"]["change"] == 312 * MiB
    assert by_key["train_runtime"]["change_pct"] == pytest.approx(10.0)
    assert by_key["eval_mem_gpu_alloc_delta"]["b"] is None


def test_metrics_saved_by_the_python_package(tmp_path: Path) -> None:
    memscope_py = pytest.importorskip("memscope")
    memscope_py.save_metrics("train", BASE, tmp_path / "a")
    memscope_py.save_metrics("train", dict(BASE, train_mem_gpu_peaked_delta=128 * MiB),
                             tmp_path / "b")
    out = memscope("diff", tmp_path / "a/train_results.json", tmp_path / "b/train_results.json",
                   check=True).stdout
    assert "train_mem_gpu_peaked_delta +64.00 MiB (+100.0%)" in out


def test_identical_metrics(tmp_path: Path) -> None:
    a = write_json(tmp_path / "a.json", BASE)
    out = memscope("diff", a, a, check=True).stdout
    assert "no memory metric changed; 0 of 6 keys changed" in out


def test_runs_by_stage_and_command(tmp_path: Path, artifacts: Path) -> None:
    a = write_run(tmp_path / "a.json", stages={"train": 700 * MiB, "eval": 300 * MiB},
                  processes={"python3 train.py": 650 * MiB, "worker": 100 * MiB},
                  peak=900 * MiB)
    b = write_run(tmp_path / "b.json", stages={"train": 1000 * MiB, "eval": 310 * MiB},
                  processes={"python3 train.py": 950 * MiB, "worker": 100 * MiB},
                  peak=1200 * MiB)
    out_json = artifacts / "runs-diff.json"
    out = memscope("diff", a, b, "--json", out_json, check=True).stdout
    assert "peak tree RSS +300.00 MiB (+33.3%), mostly stage train (+300.00 MiB)" in out
    assert "python3 train.py (+300.00 MiB peak RSS)" in out
    data = json.loads(out_json.read_text())
    assert data["kind"] == "runs"
    train = [r for r in data["stages"] if r["where"] == "train"]
    assert {r["figure"] for r in train} >= {"duration", "tree RSS peak (sampled)",
                                            "cpu_peaked_delta"}
    assert data["commands"][0]["where"] == "python3 train.py"
    assert data["commands"][0]["change"] == 300 * MiB


def test_runs_html_shows_the_terminal_tables(tmp_path: Path) -> None:
    """The terminal and the page render one Report: every cell the terminal shows is on the page,
    and the page has one table per titled table of the text."""
    a = write_run(tmp_path / "a.json", stages={"train": 700 * MiB},
                  processes={"python3 train.py": 650 * MiB}, peak=900 * MiB)
    b = write_run(tmp_path / "b.json", stages={"train": 1000 * MiB},
                  processes={"python3 train.py": 950 * MiB}, peak=1200 * MiB)
    page = tmp_path / "diff.html"
    out = memscope("diff", a, b, "--html", page, check=True).stdout
    text = html.unescape(page.read_text(encoding="utf-8"))
    assert text.count('<table class="data">') == 3  # the whole run, stages, processes
    verdict = next(line for line in out.splitlines() if line.startswith("peak tree RSS"))
    assert verdict in text
    for cell in ("python3 train.py", "+300.00 MiB", "+46.2%", "command line", "1000.00 MiB"):
        assert cell in out and f">{cell}<" in text, cell


SHIM = "bash /home/u/.pyenv/libexec/pyenv-version-name"
KiB = 1 << 10


def test_runs_match_a_renamed_script_and_the_verdict_skips_small_processes(
        tmp_path: Path, artifacts: Path) -> None:
    """Issue 27: after train.py became train_v2.py the verdict named a shim (-40 KiB) and missed
    +300 MiB in train. Processes match by command line, then program and script, then role (the
    command itself, the rank, the program), and a verdict never names one under 1% of the peak."""
    a = write_run(tmp_path / "a.json", stages={"train": 700 * MiB},
                  processes={"python3 train.py": 650 * MiB, SHIM: 3 * MiB + 40 * KiB,
                             "python3 -u /x/worker.py --id 0": 100 * MiB,
                             "python3 -u /x/worker.py --id 1": 100 * MiB,
                             "python3 rank_a.py": 200 * MiB, "python3 rank_b.py": 220 * MiB},
                  ranks={"python3 rank_a.py": 0, "python3 rank_b.py": 1}, peak=900 * MiB)
    b = write_run(tmp_path / "b.json", stages={"train": 1000 * MiB},
                  processes={"python3 train_v2.py --lr 3": 950 * MiB, SHIM: 3 * MiB,
                             "python3 /y/worker.py --id 5": 110 * MiB,
                             "python3 /y/worker.py --id 6": 100 * MiB,
                             "python3 rank_b_renamed.py": 230 * MiB,
                             "python3 rank_a_renamed.py": 205 * MiB},
                  ranks={"python3 rank_a_renamed.py": 0, "python3 rank_b_renamed.py": 1},
                  peak=1200 * MiB)
    out_json = artifacts / "runs-renamed-diff.json"
    out = memscope("diff", a, b, "--json", out_json, check=True).stdout
    assert "the process that changed most: python3 train_v2.py --lr 3 (A: python3 train.py)" in out
    assert "(+300.00 MiB peak RSS)" in out
    rows = {r["where"]: r for r in json.loads(out_json.read_text())["commands"]}
    train = rows["python3 train_v2.py --lr 3 (A: python3 train.py)"]
    assert (train["matched_by"], train["change"]) == ("the command", 300 * MiB)
    assert rows[SHIM]["matched_by"] == "command line"
    worker = rows["python3 /y/worker.py --id 5 (A: python3 -u /x/worker.py --id 0)"]
    assert (worker["matched_by"], worker["change"]) == ("program and script", 10 * MiB)
    rank1 = rows["python3 rank_b_renamed.py (A: python3 rank_b.py)"]
    assert (rank1["matched_by"], rank1["change"]) == ("rank 1", 10 * MiB)
    assert not any(r["matched_by"].startswith("only in") for r in rows.values())

    # Nothing that matters changed: a shim's +40 KiB (under 1% of the peak) is no verdict.
    c = write_run(tmp_path / "c.json", stages={"train": 700 * MiB},
                  processes={"python3 train.py": 650 * MiB, SHIM: 3 * MiB}, peak=900 * MiB)
    d = write_run(tmp_path / "d.json", stages={"train": 700 * MiB},
                  processes={"python3 train.py": 650 * MiB, SHIM: 3 * MiB + 40 * KiB},
                  peak=900 * MiB)
    out = memscope("diff", c, d, check=True).stdout
    assert "changed most" not in out, out


def test_runs_recorded_by_memscope_run(tmp_path: Path) -> None:
    # The same command line allocating 40 and 140 MiB (the size comes from the environment, so
    # the processes match by command line).
    child = [sys.executable, "-c",
             "import os; n = int(os.environ['ALLOC_MIB']) << 20; x = bytearray(n); "
             "x[::4096] = b'1' * len(x[::4096])"]
    runs = []
    for mib in (40, 140):
        path = tmp_path / f"run{mib}.json"
        memscope("run", "--json", path, "--", *child, env={"ALLOC_MIB": str(mib)}, check=True)
        runs.append(path)
    out_json = tmp_path / "diff.json"
    memscope("diff", *runs, "--json", out_json, check=True)
    data = json.loads(out_json.read_text())
    main = next(r for r in data["commands"] if "ALLOC_MIB" in r["where"])
    # VmHWM is exact; the interpreter itself is the same in both runs.
    assert main["change"] == pytest.approx(100 * MiB, abs=4 * MiB)


@pytest.fixture(scope="module")
def grown_trace(real_trace: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real trace with one 300 MiB allocation added before its peak, never freed."""
    memscope_py = pytest.importorskip("memscope")
    data = json.loads(memscope_py.load_trace(real_trace).to_json())
    events = data["device_traces"][0]
    events.insert(1300, {"action": "alloc", "addr": 1 << 50, "size": 300 * MiB, "stream": 0,
                         "time_us": events[1300]["time_us"],
                         "frames": [{"name": "make_buffer", "filename": "/home/u/grow.py",
                                     "line": 12}]})
    path = tmp_path_factory.mktemp("traces") / "grown.json"
    path.write_text(json.dumps(data))
    return path


def test_traces_name_the_site_that_grew(real_trace: Path, grown_trace: Path,
                                        artifacts: Path) -> None:
    out_json = artifacts / "traces-diff.json"
    out = memscope("diff", real_trace, grown_trace, "--json", out_json, check=True).stdout
    assert "peak live +300.00 MiB" in out and "mostly grow.py:12 make_buffer (+300.00 MiB)" in out
    lines = out.splitlines()
    site_rows = lines[lines.index(next(x for x in lines if x.strip().startswith("site"))) + 2:]
    assert site_rows[0].split()[:2] == ["grow.py:12", "make_buffer"]
    data = json.loads(out_json.read_text())
    assert data["kind"] == "traces"
    top = data["sites"][0]
    assert top["site"] == "grow.py:12 make_buffer"
    assert top["peak_change"] == 300 * MiB and top["end_change"] == 300 * MiB
    assert all(s["peak_change"] == 0 for s in data["sites"][1:])
    assert data["trace_b"]["peak_live"] - data["trace_a"]["peak_live"] == 300 * MiB
    assert data["trace_b"]["live_at_end"] - data["trace_a"]["live_at_end"] == 300 * MiB


def test_traces_in_different_formats_compare_equal(real_trace: Path, grown_trace: Path,
                                                   tmp_path: Path) -> None:
    memscope_py = pytest.importorskip("memscope")
    as_json = tmp_path / "real.json"
    memscope_py.load_trace(real_trace).save(as_json)
    out = memscope("diff", real_trace, as_json, check=True).stdout
    assert "no site changed" in out and "peak live 0 B" in out


def test_different_kinds_exit_3_naming_both(real_trace: Path, tmp_path: Path) -> None:
    metrics = write_json(tmp_path / "m.json", BASE)
    result = memscope("diff", real_trace, metrics)
    assert result.returncode == 3
    assert "is a trace" in result.stderr and "is saved metrics" in result.stderr
    assert str(metrics) in result.stderr and str(real_trace) in result.stderr


def test_replay_results_are_refused(real_trace: Path, tmp_path: Path) -> None:
    saved = tmp_path / "r.json"
    memscope("replay", real_trace, "--json", saved, check=True)
    result = memscope("diff", saved, saved)
    assert result.returncode == 3 and "replay result" in result.stderr


def test_unknown_kind_and_missing_file_exit_3(tmp_path: Path) -> None:
    odd = tmp_path / "odd.json"
    odd.write_text("[1, 2, 3]")
    result = memscope("diff", odd, odd)
    assert result.returncode == 3 and "saved metrics" in result.stderr
    result = memscope("diff", odd, tmp_path / "gone.json")
    assert result.returncode == 3 and "gone.json" in result.stderr


def test_one_argument_is_a_usage_error(real_trace: Path) -> None:
    result = memscope("diff", real_trace)
    assert result.returncode == 2


# --fail-above PCT (issue 42): exit 1 when B's peaks grew by more than PCT percent, naming them
# on stderr; 0 within it. Seconds each (the trace pair replays two traces).
def test_fail_above_on_traces(real_trace: Path, grown_trace: Path) -> None:
    grew = memscope("diff", real_trace, grown_trace, "--fail-above", "1")
    assert grew.returncode == 1, grew.stderr
    assert "peak live grew +" in grew.stderr and "more than --fail-above 1%" in grew.stderr
    assert "peak live +300.00 MiB" in grew.stdout  # the report is printed all the same
    same = memscope("diff", real_trace, real_trace, "--fail-above", "0")
    assert same.returncode == 0, same.stderr
    assert "2 peaks within --fail-above 0%" in same.stderr
    # A limit above the growth passes: the exit status follows the percentage, not any change.
    a = memscope_py_peak_live(real_trace)
    pct = 100.0 * 300 * MiB / a
    assert memscope("diff", real_trace, grown_trace, "--fail-above", f"{pct + 1:.3f}").returncode == 0
    assert memscope("diff", real_trace, grown_trace, "--fail-above", f"{pct - 1:.3f}").returncode == 1


def memscope_py_peak_live(trace: Path) -> int:
    memscope_py = pytest.importorskip("memscope")
    return int(memscope_py.load_trace(trace).replay().peak_live)


def test_fail_above_on_metrics_and_runs(tmp_path: Path) -> None:
    a = write_json(tmp_path / "a.json", BASE)
    b = write_json(tmp_path / "b.json", dict(BASE, train_mem_gpu_peaked_delta=96 * MiB))
    grew = memscope("diff", a, b, "--fail-above", "10")
    assert grew.returncode == 1
    assert "train_mem_gpu_peaked_delta grew +50.0% (64.00 MiB -> 96.00 MiB)" in grew.stderr
    assert memscope("diff", a, b, "--fail-above", "50").returncode == 0
    assert memscope("diff", b, a, "--fail-above", "0").returncode == 0  # it shrank
    ra = write_run(tmp_path / "ra.json", stages={"train": 700 * MiB}, processes={"p": 1 * MiB},
                   peak=900 * MiB)
    rb = write_run(tmp_path / "rb.json", stages={"train": 1000 * MiB}, processes={"p": 1 * MiB},
                   peak=1200 * MiB)
    run = memscope("diff", ra, rb, "--fail-above", "20")
    assert run.returncode == 1
    assert "tree RSS peak (sampled) grew +33.3%" in run.stderr
    assert "stage train: tree RSS peak (sampled) grew +42.9%" in run.stderr


def test_fail_above_without_peaks_fails_closed(tmp_path: Path) -> None:
    a = write_json(tmp_path / "a.json", {"train_runtime": 1.0})
    out = memscope("diff", a, a, "--fail-above", "10")
    assert out.returncode == 1 and "no peak is known in both files" in out.stderr
    assert memscope("diff", a, a, "--fail-above", "ten").returncode == 2
