"""`memscope replay --html` and `memscope report --html` of the saved replay JSON, opened in
headless Chromium: both pages render with no error and put the peak marker where the replay
says the peak is (label `browser`)."""

from __future__ import annotations

import html
import json
import re
import sys
from pathlib import Path

import pytest
from conftest import SOURCE_DIR, memscope

sys.path.insert(0, str(SOURCE_DIR / "python" / "tests"))
from browser import chromium, chromium_missing_reason, load_page

pytestmark = pytest.mark.skipif(chromium() is None, reason=chromium_missing_reason())


def page_state(path: Path, screenshot: Path) -> dict:
    page = load_page(path.read_text(encoding="utf-8"), screenshot=screenshot)
    assert page.errors == [], page.errors
    match = re.search(r'<pre id="memscope-report-state"[^>]*>(.*?)</pre>', page.dom, re.S)
    assert match, "the page recorded no state: the chart did not render"
    return json.loads(html.unescape(match.group(1)))


def test_replay_page_and_its_rendering_from_json(real_trace: Path, artifacts: Path) -> None:
    saved = artifacts / "replay.json"
    direct = artifacts / "replay.html"
    memscope("replay", real_trace, "--fit", "--json", saved, "--html", direct, check=True)
    peak = json.loads(saved.read_text())["peak"]

    state = page_state(direct, artifacts / "replay.png")
    names = {s["name"] for s in state["series"]}
    assert {"reserved", "allocated"} <= names
    assert state["peak"]["drawn"] is True
    assert state["peak"]["t"] == pytest.approx(peak["time_s"], abs=1e-6)
    assert state["peak"]["bytes"] == peak["reserved"]

    # `report` renders the same page from the JSON alone, without the trace.
    again = artifacts / "report.html"
    memscope("report", saved, "--html", again, check=True)
    state_again = page_state(again, artifacts / "report.png")
    assert state_again["peak"] == state["peak"]
    assert [s["name"] for s in state_again["series"]] == [s["name"] for s in state["series"]]
