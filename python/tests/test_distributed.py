"""memscope.distributed: the gather across ranks through real engines in real processes (4 ranks
under torchrun with gloo, 4 under mpirun with mpi4py; marked `distributed`, ctest's
python_distributed_tests), the Trainer callback under torchrun with 2 ranks, and, without any
engine, the checks, the payload and the table (plain tests, run by python_test_distributed)."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import MiB

import memscope
import memscope.distributed as msd
from memscope import _memscope

HERE = Path(__file__).resolve().parent
WORKERS = HERE / "distributed"
RANKS = 4
# Whole-job bound: torch's import takes seconds per process on two shared cores.
JOB_TIMEOUT = 240


def _env() -> dict[str, str]:
    env = dict(os.environ)
    build = Path(memscope.__file__).resolve().parent.parent  # the tree this test imports
    env["PYTHONPATH"] = os.pathsep.join(
        [str(build), *filter(None, [env.get("PYTHONPATH")])])
    env["OMP_NUM_THREADS"] = "1"
    # OpenMPI refuses to run as root without both (CI containers run as root).
    env["OMPI_ALLOW_RUN_AS_ROOT"] = env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    for var in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "RANK", "WORLD_SIZE"):
        env.pop(var, None)
    return env


def _torchrun(nproc: int, script: str, *args: str) -> subprocess.CompletedProcess:
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed (scripts/bootstrap installs a CPU build)")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc),
           "--rdzv-backend=c10d", "--rdzv-endpoint=localhost:0", str(WORKERS / script), *args]
    return _run(cmd)


def _mpirun(nproc: int, script: str, *args: str) -> subprocess.CompletedProcess:
    mpirun = shutil.which("mpirun")
    if mpirun is None or importlib.util.find_spec("mpi4py") is None:
        pytest.skip("mpirun or mpi4py is missing (scripts/bootstrap installs OpenMPI, mpi4py)")
    cmd = [mpirun, "-np", str(nproc), "--oversubscribe", "--quiet", sys.executable,
           str(WORKERS / script), *args]
    return _run(cmd)


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    """Runs a job in its own session. One that outlives JOB_TIMEOUT is killed with all of its
    processes and comes back with returncode -SIGKILL and what it printed: each test says what it
    checks (the answers written, a clean exit), and no rank outlives the test."""
    with subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, start_new_session=True) as job:
        try:
            out, err = job.communicate(timeout=JOB_TIMEOUT)
            return subprocess.CompletedProcess(cmd, job.returncode, out, err)
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)
            out, err = job.communicate()
            return subprocess.CompletedProcess(
                cmd, -signal.SIGKILL, out, f"{err}\n[the job was killed after {JOB_TIMEOUT} s]")


def _launch(engine: str, *args: str) -> subprocess.CompletedProcess:
    run = _torchrun if engine == "torch" else _mpirun
    return run(RANKS, "gather_worker.py", engine, *args)


def _answers(out: Path, ranks: int, job: subprocess.CompletedProcess) -> list[dict]:
    missing = [r for r in range(ranks) if not (out / f"rank{r}.json").exists()]
    assert not missing, \
        f"ranks {missing} wrote nothing:\n{job.stdout[-3000:]}\n{job.stderr[-6000:]}"
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(ranks)]


def _reduction(values: dict[int, float], world: int) -> dict:
    """The reduction computed here, independently of memscope, from rank -> value."""
    top = max(values.values())
    return {"min": min(values.values()), "max": top, "sum": sum(values.values()),
            "mean": sum(values.values()) / len(values), "count": len(values),
            "argmax": min(r for r, v in values.items() if v == top),
            "missing": [r for r in range(world) if r not in values]}


def _check_reduction(got: dict, values: dict[int, float], world: int, key: str) -> None:
    want = _reduction(values, world)
    assert got["missing"] == want.pop("missing"), key
    assert {k: v for k, v in got.items() if k != "missing"} == pytest.approx(want), key


# Real engines, real processes ------------------------------------------------------------


@pytest.mark.distributed
@pytest.mark.parametrize("engine", ["torch", "mpi"])
def test_four_ranks_exact_table(engine: str, tmp_path: Path) -> None:
    job = _launch(engine, "table", str(tmp_path))
    assert job.returncode == 0, job.stderr[-6000:]
    answers = _answers(tmp_path, RANKS, job)
    assert {a["engine_used"] for a in answers} == {engine}
    for me in answers:
        first, second, third, fourth = me["tables"]
        assert first["world_size"] == RANKS
        # Exact per rank: every rank's row is what that rank measured, on every rank (dst=None).
        assert first["ranks"] == [a["metrics"] for a in answers]
        for r, row in enumerate(first["ranks"]):
            assert row["train_mem_cpu_alloc_delta"] == (r + 1) * 3 * MiB
            assert row["train_mem_cpu_peaked_delta"] == (r + 1) * 4 * MiB
            if r == 2:  # the rank that skipped eval: missing, never 0
                assert not any(k.startswith("eval_") for k in row)
            else:
                assert row["eval_mem_cpu_peaked_delta"] == (r + 1) * MiB
        for key, red in first["reductions"].items():
            values = {r: row[key] for r, row in enumerate(first["ranks"]) if key in row}
            _check_reduction(red, values, RANKS, key)
        assert first["reductions"]["train_mem_cpu_peaked_delta"]["max"] == 16 * MiB
        assert first["reductions"]["train_mem_cpu_peaked_delta"]["argmax"] == 3
        assert first["reductions"]["eval_mem_cpu_peaked_delta"]["missing"] == [2]
        assert first["reductions"]["eval_mem_cpu_peaked_delta"]["count"] == 3
        # A new key on one rank: agreed again in the same call, reported for rank 1 only.
        assert second["reductions"]["rank1_only_bytes"] == _reduction({1: 12345}, RANKS)
        assert second["ranks"][1]["rank1_only_bytes"] == 12345
        assert {k: v for k, v in second["ranks"][1].items() if k != "rank1_only_bytes"} == \
            first["ranks"][1]
        # dst=0: the table on rank 0 only; ints stay ints, floats floats.
        if me["rank"] == 0:
            assert third["ranks"] == [{"loss": 0.25 * r, "step": 10 + r} for r in range(RANKS)]
            assert all(type(row["step"]) is int and type(row["loss"]) is float
                       for row in third["ranks"])
            assert third["reductions"]["step"]["argmax"] == 3
        else:
            assert third is None
        # A sub-group (a process group / a split communicator): its own ranks, its own table.
        assert fourth["ranks"] == [{"parity_rank": r} for r in range(me["rank"] % 2, RANKS, 2)]
    text = answers[0]["format"]
    assert "16.00 MiB" in text and "10.00 MiB" in text  # train peaked: max, mean in byte units
    eval_row = next(line for line in text.splitlines()
                    if line.startswith("eval_mem_cpu_peaked_delta"))
    assert eval_row.split()[-1] == "2"  # missing ranks column


@pytest.mark.distributed
@pytest.mark.parametrize("engine", ["torch", "mpi"])
@pytest.mark.parametrize("leaver", [2, 0])
def test_rank_that_leaves_times_out_the_others(engine: str, leaver: int, tmp_path: Path) -> None:
    job = _launch(engine, "exit", str(tmp_path), str(leaver))
    answers = _answers(tmp_path, RANKS, job)
    assert answers[leaver].get("left")
    for a in answers:
        if a["rank"] == leaver:
            continue
        assert a["error"] is not None, f"rank {a['rank']} did not raise"
        assert a["missing_ranks"] == [leaver], a
        assert f"rank(s) {leaver} of 4" in a["error"]
        assert "unusable" in a["error"]
    # No timed assertion: the job's subprocess timeout (JOB_TIMEOUT) bounds the whole; the
    # gathers' 5 s timeout (MPI: plus up to 5 s for the root's verdict) is what ends them.


@pytest.mark.distributed
def test_trainer_callback_two_ranks(tmp_path: Path) -> None:
    job = _torchrun(2, "trainer_worker.py", str(tmp_path))
    assert job.returncode == 0, job.stderr[-6000:]
    answers = _answers(tmp_path, 2, job)
    saved = json.loads((tmp_path / "trainer" / "memscope_ranks.json").read_text())
    assert saved["world_size"] == 2
    for r, ranks_row in enumerate(saved["ranks"]):  # each rank's own values, next to the results
        assert ranks_row["train_mem_gpu_alloc_delta"] == 5 * MiB + (r + 1) * 2 * MiB
        assert ranks_row["train_mem_gpu_peaked_delta"] == (r + 1) * 50 * MiB - 5 * MiB
        assert ranks_row["eval_mem_gpu_peaked_delta"] == 10 * MiB
        assert ranks_row["init_mem_gpu_alloc_delta"] == 7 * MiB
    zero, one = answers
    train = zero["train"]
    assert train["train_mem_gpu_peaked_delta"] == 95 * MiB  # max over ranks...
    assert train["train_mem_gpu_peaked_delta_rank"] == 1  # ...and who
    assert train["train_mem_gpu_peaked_delta_min"] == 45 * MiB
    assert train["train_mem_gpu_peaked_delta_mean"] == 70 * MiB
    assert train["train_mem_gpu_alloc_delta"] == 9 * MiB
    assert train["train_runtime"] != train.get("train_runtime_rank")  # the Trainer's, kept
    assert zero["evaluate"]["eval_mem_gpu_peaked_delta"] == 10 * MiB
    assert zero["evaluate"]["eval_mem_gpu_peaked_delta_rank"] == 0  # a tie: the lowest rank
    assert any("train_mem_gpu_peaked_delta" in line and "95.00 MiB" in line
               for line in "\n".join(zero["logged"]).splitlines())
    # Rank 1 keeps its own values and logs no table.
    assert one["train"]["train_mem_gpu_peaked_delta"] == 45 * MiB + 50 * MiB
    assert "train_mem_gpu_peaked_delta_rank" not in one["train"]
    assert one["table"] is None and zero["table"]["world_size"] == 2


# Without an engine ---------------------------------------------------------------------


def test_not_distributed_says_how(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    if "torch" in sys.modules:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            pytest.skip("torch.distributed is initialised in this process")
    with pytest.raises(msd.NotDistributedError, match=r"torchrun.*mpirun"):
        msd.gather({"a": 1})


def test_bad_input_names_it() -> None:
    with pytest.raises(TypeError, match="'train_mem_cpu_mode'"):
        msd.gather({"x": 1, "train_mem_cpu_mode": "kernel-hwm"})
    with pytest.raises(TypeError, match="3 is a int"):
        msd.gather({3: 1})
    with pytest.raises(TypeError, match="dict of metrics"):
        msd.gather([("a", 1)])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'nan_key' is NaN"):
        msd.gather({"nan_key": math.nan})
    with pytest.raises(ValueError, match=r"'huge' .* 2\*\*53"):
        msd.gather({"huge": 2**53 + 1})
    with pytest.raises(ValueError, match="engine='nccl'"):
        msd.gather({"a": 1}, engine="nccl")
    with pytest.raises(ValueError, match="timeout=0"):
        msd.gather({"a": 1}, timeout=0)


def test_payload_round_trip_randomized() -> None:
    """Any mix of ints (up to 2**53) and floats over any table survives the float64 payload
    (the C++ core's codec, which memscope::mpi uses too) exactly, types included; keys a rank
    lacks come back absent."""
    rng = random.Random(15)
    for _ in range(200):
        table = sorted({f"k{rng.randrange(400)}" for _ in range(rng.randrange(1, 130))})
        mine: dict[str, int | float] = {}
        for key in table:
            pick = rng.random()
            if pick < 0.4:
                mine[key] = rng.randrange(-(2**53), 2**53 + 1)
            elif pick < 0.7:
                mine[key] = rng.uniform(-1e300, 1e300)
            elif pick < 0.8:
                mine[key] = rng.choice([0.0, -0.0, math.inf, -math.inf, 5e-324])
        row = _memscope.rank_encode(table, mine, "test")
        assert len(row) == 1 + len(table) + math.ceil(len(table) / 52)  # fixed size for K
        assert _memscope.rank_payload_fits(row, len(table))
        [back] = _memscope.rank_decode(row, table)
        assert back == mine
        assert all(type(back[k]) is type(v) for k, v in mine.items())


def test_a_new_key_grows_the_table() -> None:
    table = ["a", "b"]
    assert not _memscope.rank_payload_fits(_memscope.rank_encode(table, {"z": 1}, "t"), 2)
    blobs = _memscope.rank_key_blob({"a": 1}) + _memscope.rank_key_blob({"z": 1.5})
    assert blobs == b"a\0z\0"
    assert _memscope.rank_agree_table(table, blobs) == ["a", "b", "z"]  # only grows


def test_table_reductions_randomized() -> None:
    rng = random.Random(1024)
    for _ in range(50):
        world = rng.randrange(1, 40)
        keys = [f"m{i}_delta" for i in range(rng.randrange(1, 8))]
        ranks = [{k: rng.randrange(0, 5) * MiB for k in keys if rng.random() < 0.8}
                 for _ in range(world)]
        table = msd.RankTable(ranks)
        for key in keys:
            values = {r: row[key] for r, row in enumerate(ranks) if key in row}
            if not values:
                assert key not in table.reductions
                continue
            _check_reduction(vars(table.reductions[key]), values, world, key)
        json.dumps(table.to_dict())  # JSON-ready
        assert table.per_rank_metrics(world - 1) == ranks[world - 1]
    with pytest.raises(IndexError, match="rank 5 is not in this table"):
        msd.RankTable([{}]).per_rank_metrics(5)


def test_format_aligns_and_abbreviates_missing_ranks() -> None:
    ranks = [{"train_mem_gpu_peaked_delta": 3 * MiB, "loss": 0.5}] + [{} for _ in range(4)] + \
        [{"train_mem_gpu_peaked_delta": 7 * MiB}]
    text = msd.RankTable(ranks).format()
    lines = text.splitlines()
    assert lines[0] == "memscope: 2 metrics over 6 ranks"
    assert len({len(line) for line in lines[1:]}) == 1  # aligned: every row as wide
    row = next(line for line in lines if line.startswith("train_mem_gpu_peaked_delta"))
    assert row.split()[1:] == ["3.00", "MiB", "7.00", "MiB", "5", "5.00", "MiB", "10.00", "MiB",
                               "1-4"]
    loss = next(line for line in lines if line.startswith("loss"))
    assert loss.split()[-1] == "1-5"


def test_import_memscope_stays_light() -> None:
    code = ("import sys, memscope, memscope.distributed; "
            "print(sorted(m for m in ('torch', 'mpi4py', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True,
                         text=True, timeout=60, check=True).stdout
    assert "torch" not in out and "mpi4py" not in out
    assert memscope.distributed is msd  # also reachable as an attribute, imported on first use
