"""Every ```python block of README.md runs as written: each in a fresh interpreter that imports
memscope from this build, and exits 0. (scripts/check-fresh-venv does the same after
`pip install .[numpy]` in a new virtual environment.) A ```py block is a fragment of the
reader's own program (the three lines for a PyTorch job on a GPU) and is not run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import memscope

README = Path(__file__).resolve().parents[2] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", README.read_text(), re.DOTALL | re.MULTILINE)


def test_the_readme_has_python_examples() -> None:
    assert python_blocks()


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_readme_python_block_runs(index: int, tmp_path: Path) -> None:
    code = python_blocks()[index]
    package_root = str(Path(memscope.__file__).resolve().parents[1])
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSCOPE_")}
    env["PYTHONPATH"] = package_root
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, (f"README.md python block {index} failed:\n{code}\n"
                                    f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}")
