"""The corpus of real PyTorch traces, for the Python tests: the rule of trace_corpus.hpp.

MEMSCOPE_TRACES (environment) when set and not empty, else ../shared/traces beside the checkout.
The project commits none of the traces; a test that needs one the corpus lacks is skipped with
the reason (pytest.skip), never passed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SOURCE_DIR = Path(__file__).resolve().parents[2]
SMALL_TRAIN_STEP = "torch_snapshot_cs336-small_ctx256_bs32_fwd_bwd.pickle"


def traces_dir() -> Path:
    set_to = os.environ.get("MEMSCOPE_TRACES", "")
    return Path(set_to) if set_to else SOURCE_DIR.parent / "shared" / "traces"


def all_traces() -> list[Path]:
    """Every trace in the corpus (*.pickle, *.json), sorted by name; empty when there is none."""
    folder = traces_dir()
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir()
                  if p.is_file() and p.suffix in (".pickle", ".json"))


def missing_reason(name: str) -> str:
    return (f"no trace {name} in {traces_dir()} (the corpus of real traces; set MEMSCOPE_TRACES "
            "to the folder that holds it)")


def trace_or_skip(name: str = SMALL_TRAIN_STEP) -> Path:
    """The named trace's path; skips the calling test when the corpus does not hold it."""
    path = traces_dir() / name
    if not path.is_file():
        pytest.skip(missing_reason(name))
    return path
