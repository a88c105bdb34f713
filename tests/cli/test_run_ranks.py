"""`memscope run`'s per-rank lines without a launcher: processes started with a rank in their
environment (as torchrun and mpirun start them) show as ranks; a rank's forked worker, which
inherits the rank, is grouped into it; a run without ranks has no Ranks table. The launchers
themselves are in test_run_distributed.py (label distributed).
"""

from __future__ import annotations

from pathlib import Path

from conftest import MiB, memscope
from rank_lines import PYTHON, RANK_CHILD, pid_of, record_ranks, summary_rank_rows


def test_a_process_with_rank_3_in_its_environment_is_rank_3(artifacts: Path) -> None:
    for old in artifacts.glob("*.pid"):
        old.unlink()
    # env(1) execs the child with the variables; memscope's own environment has none.
    result = memscope("run", "--json", artifacts / "run.json", "--", "env", "RANK=3",
                      "LOCAL_RANK=1", "WORLD_SIZE=8", PYTHON, RANK_CHILD, 8, 0.5, artifacts,
                      check=True)
    pid = pid_of(artifacts, "rank-3")
    rows = summary_rank_rows(result.stdout)
    assert [(r["rank"], r["local"], r["pid"]) for r in rows] == [("3", "1", str(pid))]
    assert "Ranks (from each process's environment: RANK)" in result.stdout
    assert "1 of the job's 8 ranks ran under memscope" in result.stdout
    assert "max " in result.stdout and "(rank 3)" in result.stdout

    record, ranks = record_ranks(artifacts / "run.json")
    assert len(ranks) == 1
    rank = ranks[0]
    assert (rank["rank"], rank["variable"], rank["local_rank"], rank["world_size"]) == (
        3, "RANK", 1, 8)
    assert rank["pid"] == pid and rank["pids"] == [pid]
    assert rank["peak_rss"] >= 4 * 8 * MiB  # (rank + 1) * 8 MiB touched
    # One process: the rank's peak is that process's own, with its source.
    own = next(p for p in record["processes"] if p["pid"] == pid)
    assert rank["peak_rss"] == own["peak_rss"] == rank["own_peak_rss"]
    assert rank["peak_rss_source"] == own["peak_rss_source"]
    assert own["rank"]["rank"] == 3
    # `memscope report` prints the saved run's summary, rank lines included.
    report = memscope("report", artifacts / "run.json", check=True).stdout
    assert [r["rank"] for r in summary_rank_rows(report)] == ["3"]


def test_a_ranks_worker_is_grouped_into_it(artifacts: Path) -> None:
    for old in artifacts.glob("*.pid"):
        old.unlink()
    # Rank 1 touches 2 * 16 MiB and its forked worker 48 MiB, both held for a second.
    result = memscope("run", "--interval", 50, "--json", artifacts / "run.json", "--", "env",
                      "RANK=1", PYTHON, RANK_CHILD, 16, 1.0, artifacts, 48, check=True)
    own, worker = pid_of(artifacts, "rank-1"), pid_of(artifacts, "worker-1")
    record, ranks = record_ranks(artifacts / "run.json")
    assert len(ranks) == 1, ranks
    rank = ranks[0]
    assert rank["pid"] == own
    assert sorted(rank["pids"]) == sorted([own, worker]) and rank["pids"][0] == own
    peaks = {p["pid"]: p["peak_rss"] for p in record["processes"]}
    assert rank["own_peak_rss"] == peaks[own] >= 32 * MiB
    assert peaks[worker] >= 48 * MiB
    # A sample of the summed RSS is never above the processes' peaks added up. (That a sample
    # sees both hold their memory together depends on the machine's load: not asserted.)
    assert 0 < rank["sampled_peak_rss"] <= rank["sum_of_peaks"]
    assert rank["peak_rss"] == max(rank["own_peak_rss"], rank["sampled_peak_rss"])
    assert rank["sum_of_peaks"] == peaks[own] + peaks[worker] >= rank["peak_rss"]
    assert sorted(rank["stages"]) == ["alloc", "worker"]  # the worker's stage is the rank's
    rows = summary_rank_rows(result.stdout)
    assert len(rows) == 1 and rows[0]["processes"] == "2"
    assert "sum of peaks" in rows[0] and "own process" in rows[0]
    assert "A rank's processes are its own and its children" in result.stdout


def test_no_rank_variables_no_ranks(artifacts: Path) -> None:
    html = artifacts / "run.html"
    result = memscope("run", "--json", artifacts / "run.json", "--html", html, "--", "env",
                      "-u", "RANK", "-u", "LOCAL_RANK", "-u", "PMI_RANK", "-u",
                      "OMPI_COMM_WORLD_RANK", "RANK=not-a-number", PYTHON, "-c", "pass",
                      check=True)
    assert "Ranks" not in result.stdout
    _, ranks = record_ranks(artifacts / "run.json")
    assert ranks == []


def test_the_html_report_has_a_ranks_table(artifacts: Path) -> None:
    html = artifacts / "run.html"
    memscope("run", "--html", html, "--", "env", "PMI_RANK=2", PYTHON, RANK_CHILD, 4, 0.3,
             artifacts, check=True)
    page = html.read_text()
    assert "Ranks" in page and "max peak RSS over ranks" in page
