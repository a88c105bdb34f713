"""Reading `memscope run`'s per-rank lines back, for test_run_ranks.py and
test_run_distributed.py: the summary's "Ranks" table and the recording's "ranks" array."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

RANK_CHILD = Path(__file__).resolve().parent / "rank_child.py"
PYTHON = sys.executable  # the interpreter itself, not a shim (pyenv's runs helpers of its own)


def summary_rank_rows(stdout: str) -> list[dict[str, str]]:
    """The rows of the summary's Ranks table, as column title -> cell."""
    lines = stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("Ranks (")), None)
    assert start is not None, f"no Ranks table in the summary:\n{stdout}"
    header = lines[start + 1]
    # Columns are separated by two spaces or more; titles hold single spaces ("peak RSS").
    titles = re.split(r"\s{2,}", header.strip())
    rows = []
    for line in lines[start + 3:]:
        if not line.startswith("  ") or not line.strip():
            break
        cells = re.split(r"\s{2,}", line.strip())
        assert len(cells) == len(titles), (titles, cells)
        rows.append(dict(zip(titles, cells, strict=True)))
    return rows


def record_ranks(path: Path) -> tuple[dict, list[dict]]:
    record = json.loads(path.read_text())
    assert record["format"] == "memscope-run"
    return record, record.get("ranks", [])


def pid_of(folder: Path, name: str) -> int:
    return int((folder / f"{name}.pid").read_text())
