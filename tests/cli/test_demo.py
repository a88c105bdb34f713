"""`make demo`'s program: the trace it records of its training loop (demo_trace.pickle) carries
C++ stacks that name the demo's code, so `memscope replay` blames demo::step, not <no frames>
(issue 44)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import BUILD_DIR, memscope

DEMO = BUILD_DIR / "examples" / "memscope_demo"


@pytest.mark.skipif(not DEMO.exists(), reason=f"{DEMO} is not built")
def test_the_demos_trace_names_its_code(tmp_path: Path) -> None:
    # About 30 s on 2 cores: the demo's loops write 72 MiB per step into host memory.
    subprocess.run([DEMO, tmp_path], check=True, capture_output=True, timeout=240)
    out = tmp_path / "replay.json"
    r = memscope("replay", tmp_path / "demo_trace.pickle", "--json", out)
    assert r.returncode == 0, r.stderr
    sites = [s["where"] for s in json.loads(out.read_text())["peak_live"]["top_sites"]]
    assert sites and all("demo::step" in where for where in sites), sites
