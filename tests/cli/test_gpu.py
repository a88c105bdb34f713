"""The command on a GPU (ctest label gpu; Skipped with the reason where there is none):
`memscope info` lists the device, and `memscope run` attributes a child's device memory to it
through NVML while the child's stages are marked."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import MiB, memscope


def gpu_reason() -> str | None:
    """Why this test cannot use a GPU here (None when it can): NVML as `memscope info` sees it,
    and CUDA through the build's Python package."""
    info = json.loads(memscope("info", "--json", check=True).stdout)
    if not info["nvml"]["available"]:
        return f"NVML unusable: {info['nvml']['reason']}"
    if not info["gpus"]:
        return "NVML sees no GPU"
    probe = subprocess.run(
        [sys.executable, "-c", "import memscope; print(memscope._memscope._cuda_available())"],
        capture_output=True, text=True, timeout=120)
    if probe.returncode != 0 or "True" not in probe.stdout:
        return f"no usable CUDA GPU for the Python package: {probe.stdout}{probe.stderr}"
    return None


@pytest.fixture(scope="module")
def gpu() -> None:
    reason = gpu_reason()
    if reason:
        pytest.skip(reason)


def test_info_lists_each_gpu_with_its_memory(gpu: None) -> None:
    info = json.loads(memscope("info", "--json", check=True).stdout)
    for device in info["gpus"]:
        assert device["name"] and device["total"] > 0
        assert device["used"] + device["free"] <= device["total"]
    text = memscope("info", check=True).stdout
    assert info["gpus"][0]["name"] in text


CHILD = textwrap.dedent("""
    import time, memscope
    tracker = memscope.Tracker()
    with tracker.stage("gpu"):
        held = memscope.buffer(1024 << 20, "cuda:0")
        time.sleep(1.0)  # several samples see it
        held.free()
""")


def test_run_attributes_device_memory_to_the_child(gpu: None, artifacts: Path) -> None:
    out = artifacts / "run.json"
    result = memscope("run", "--interval", "50", "--json", out, "--", sys.executable, "-c",
                      CHILD, timeout=240)
    assert result.returncode == 0, result.stderr
    record = json.loads(out.read_text())
    assert record["gpu_status"].startswith("nvml"), record["gpu_status"]
    main = record["processes"][0]
    assert main["peak_gpu"] >= 1024 * MiB, main
    assert max(record["tree_gpu"]) >= 1024 * MiB
    assert [s["name"] for s in record["stages"] if s["name"] == "gpu"] == ["gpu"]
