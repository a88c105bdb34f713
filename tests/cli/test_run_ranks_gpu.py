"""Per-rank GPU memory under `memscope run` (ctest label gpu; Skipped with the reason where there
is no GPU): torchrun --nproc_per_node 2 starts two ranks that each hold (rank + 1) * 512 MiB on
cuda:0 through the build's Python package; NVML attributes each process's device memory, and each
rank's line must show its own, ordered as the amounts are, with the max on rank 1."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import MiB, memscope
from rank_lines import record_ranks, summary_rank_rows
from test_gpu import gpu_reason

RANKS = 2
STEP = 512 * MiB

RANK_SCRIPT = textwrap.dedent("""
    import os, time, memscope
    rank = int(os.environ["RANK"])
    held = memscope.buffer((rank + 1) * (512 << 20), "cuda:0")
    time.sleep(1.5)  # several samples see it
    held.free()
""")


@pytest.fixture(scope="module")
def gpu() -> None:
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed (torchrun comes with it)")
    reason = gpu_reason()
    if reason:
        pytest.skip(reason)


def test_each_ranks_line_has_its_own_gpu_memory(gpu: None, artifacts: Path) -> None:
    script = artifacts / "rank_gpu.py"
    script.write_text(RANK_SCRIPT)
    result = memscope("run", "--interval", 50, "--json", artifacts / "run.json", "--",
                      sys.executable, "-m", "torch.distributed.run", "--standalone",
                      "--nproc_per_node", RANKS, script, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    record, ranks = record_ranks(artifacts / "run.json")
    assert record["gpu_status"].startswith("nvml"), record["gpu_status"]
    assert [r["rank"] for r in ranks] == list(range(RANKS))
    gpu_peaks = [r["peak_gpu"] for r in ranks]
    for r in ranks:
        assert r["peak_gpu"] >= (r["rank"] + 1) * STEP, r
    # Each process has a CUDA context of its own besides the buffer; the buffers differ by 512 MiB.
    assert gpu_peaks[1] - gpu_peaks[0] >= STEP // 2, gpu_peaks
    rows = summary_rank_rows(result.stdout)
    assert [row["rank"] for row in rows] == ["0", "1"]
    assert all(row["peak GPU"] != "-" for row in rows), rows
    assert "Peak GPU over ranks: max" in result.stdout
    assert "(rank 1)" in result.stdout.split("Peak GPU over ranks: max", 1)[1].splitlines()[0]
