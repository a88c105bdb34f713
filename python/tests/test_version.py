"""One version number: the top-level VERSION file, read by CMake (project()), by pyproject.toml
(scikit-build-core's regex provider) and, through the compiled module, memscope.__version__."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import memscope

ROOT = Path(__file__).resolve().parents[2]


def test_version_is_the_version_file() -> None:
    version = (ROOT / "VERSION").read_text().strip()
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), "CMake's project() takes numbers only"
    assert memscope.__version__ == version
    assert memscope._memscope.__version__ == version


def test_no_other_file_states_it() -> None:
    if sys.version_info >= (3, 11):
        import tomllib

        project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
        assert "version" not in project and "version" in project["dynamic"]
    assert "VERSION ${memscope_version}" in (ROOT / "CMakeLists.txt").read_text()
