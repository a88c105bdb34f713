"""`memscope run` in front of real launchers (label distributed): mpirun -np 4 (Open MPI) and
torchrun --nproc_per_node 4 start rank_child.py, which touches (rank + 1) * 64 MiB per rank. The
summary must show 4 rank lines sorted by rank, each rank's peak at least its known amount and
ordered as the amounts are, the max on rank 3, the stages each rank marked (one only rank 0
ran); the recording's "ranks" array the same, each rank the process that says it is that rank.
The launcher is not a rank.

Skipped where mpirun or torch is not installed (scripts/bootstrap installs both).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest
from conftest import MiB, memscope
from rank_lines import PYTHON, RANK_CHILD, pid_of, record_ranks, summary_rank_rows

RANKS = 4
STEP_MIB = 64  # rank r touches (r + 1) * 64 MiB
HOLD_S = 1.0  # long enough for several 100 ms samples of every rank

# Open MPI refuses to start as root unless told twice that it is meant.
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def launcher_env() -> dict[str, str]:
    """The launchers' environment: no rank of a job this test runs inside."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "PMI_RANK", "PMI_SIZE")
           and not k.startswith("OMPI_COMM_WORLD")}
    env.update(MPI_ENV)
    return env


def check_ranks(stdout: str, json_path: Path, pids: Path, variable: str, launcher: int) -> None:
    rows = summary_rank_rows(stdout)
    assert [r["rank"] for r in rows] == [str(r) for r in range(RANKS)], stdout
    assert f"Ranks (from each process's environment: {variable})" in stdout
    assert f"(rank {RANKS - 1})" in stdout.split("Peak RSS over ranks: max", 1)[1].splitlines()[0]

    record, ranks = record_ranks(json_path)
    assert [r["rank"] for r in ranks] == list(range(RANKS))
    peaks = []
    for r in ranks:
        known = (r["rank"] + 1) * STEP_MIB * MiB
        assert r["pid"] == pid_of(pids, f"rank-{r['rank']}"), r
        assert r["pid"] != launcher
        assert r["variable"] == variable
        assert r["world_size"] == RANKS
        assert r["local_rank"] == r["rank"]  # one node
        assert r["peak_rss"] >= known, (r, known)
        # The bytearray is the bulk of each rank; the interpreter adds far less than a step.
        assert r["peak_rss"] < known + STEP_MIB * MiB, (r, known)
        peaks.append(r["peak_rss"])
    assert peaks == sorted(peaks) and len(set(peaks)) == RANKS
    # Every rank marked "alloc"; only rank 0 "rank0_only".
    assert [r["stages"] for r in ranks] == [["alloc", "rank0_only"]] + [["alloc"]] * (RANKS - 1)
    assert [row["stages"] for row in rows] == ["alloc, rank0_only"] + ["alloc"] * (RANKS - 1)
    # The Stages table says which rank ran each stage.
    stage_lines = stdout.split("\nStages\n", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    ranks_of_stages = sorted((line.split()[0], int(line.split()[2])) for line in stage_lines)
    assert ranks_of_stages == sorted([("alloc", r) for r in range(RANKS)] + [("rank0_only", 0)])
    # The summary's line for each rank names the same process.
    assert [int(row["pid"]) for row in rows] == [r["pid"] for r in ranks]
    # The launcher, the command memscope started, has no rank.
    assert "rank" not in record["processes"][0]


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun (Open MPI) is not installed")
def test_mpirun_four_ranks(artifacts: Path) -> None:
    for old in artifacts.glob("*.pid"):
        old.unlink()
    result = memscope("run", "--json", artifacts / "run.json", "--", "mpirun", "-np", RANKS,
                      "--oversubscribe", PYTHON, RANK_CHILD, STEP_MIB, HOLD_S, artifacts,
                      env=launcher_env(), timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    record, _ = record_ranks(artifacts / "run.json")
    check_ranks(result.stdout, artifacts / "run.json", artifacts, "OMPI_COMM_WORLD_RANK",
                record["processes"][0]["pid"])


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_torchrun_four_ranks(artifacts: Path) -> None:
    for old in artifacts.glob("*.pid"):
        old.unlink()
    # python -m torch.distributed.run is torchrun, without a shim in front of it.
    result = memscope("run", "--json", artifacts / "run.json", "--", PYTHON, "-m",
                      "torch.distributed.run", "--standalone", "--nproc_per_node", RANKS,
                      RANK_CHILD, STEP_MIB, HOLD_S, artifacts, env=launcher_env(), timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    record, _ = record_ranks(artifacts / "run.json")
    check_ranks(result.stdout, artifacts / "run.json", artifacts, "RANK",
                record["processes"][0]["pid"])
