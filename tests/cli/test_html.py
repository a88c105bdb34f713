"""HTML reports in headless Chromium: pages written by html_fixture (Reports built in code with
known contents) and by the command itself load with no page error, and what the page drew
(its #memscope-report-state, written after Chart.js rendered) has the expected lines, point
counts and peak. Each page's screenshot is saved under BUILD_DIR/test-artifacts/cli/.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BUILD_DIR, CLI, SOURCE_DIR, memscope

sys.path.insert(0, str(SOURCE_DIR / "python" / "tests"))
from browser import chromium, chromium_missing_reason, load_page

FIXTURE = BUILD_DIR / "tests" / "cli" / "memscope_html_fixture"
MAX_POINTS = 4000  # HtmlOptions::max_points
MiB = 1 << 20

needs_chromium = pytest.mark.skipif(chromium() is None, reason=chromium_missing_reason())


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not FIXTURE.exists():
        pytest.skip(f"{FIXTURE} is not built (target memscope_html_fixture)")
    out = tmp_path_factory.mktemp("pages")
    subprocess.run([str(FIXTURE), str(out)], check=True, timeout=120)
    return out


def load(path: Path, artifacts: Path) -> tuple[dict, str]:
    """Loads the page; returns its state and DOM, after checking it raised no error."""
    shot = artifacts / (path.stem + ".png")
    page = load_page(path.read_text(encoding="utf-8"), screenshot=shot)
    assert page.errors == [], page.errors
    assert page.screenshot is not None and page.screenshot.stat().st_size > 0
    m = re.search(r'<pre id="memscope-report-state"[^>]*>(.*?)</pre>', page.dom, re.DOTALL)
    assert m, "the page wrote no state"
    state = json.loads(html.unescape(m.group(1)))
    assert state["rendered"] is True, state
    return state, page.dom


def by_name(state: dict) -> dict[str, dict]:
    return {s["name"]: s for s in state["series"]}


def check_self_contained(text: str) -> None:
    # No network: nothing loaded from elsewhere.
    assert not re.search(r"""<(script|link|img)[^>]+(src|href)=["']?https?:""", text)
    assert "Chart.js v3" in text


@needs_chromium
def test_run_like_report(pages: Path, artifacts: Path) -> None:
    text = (pages / "run.html").read_text(encoding="utf-8")
    check_self_contained(text)
    state, dom = load(pages / "run.html", artifacts)
    series = by_name(state)
    assert list(series) == ["tree RSS (sampled)", "pid 100 RSS", "pid 101 RSS",
                            "GPU used (device 0)"]
    assert series["tree RSS (sampled)"]["points"] == 101
    assert series["pid 101 RSS"]["points"] == 61  # it lived from 2 s to 8 s
    assert all(s["sampled"] and s["elements"] == s["points"] for s in series.values())
    assert state["peak"] == {"series": "tree RSS (sampled)", "t": 6, "bytes": 900 * MiB,
                             "label": "peak 900 MiB at 6.000 s (stage train)", "drawn": True}
    # The line drawn reaches the marked peak, where the marker is.
    assert series["tree RSS (sampled)"]["max"] == {"t": 6, "bytes": 900 * MiB}
    assert state["bands"] == ["load", "train", "eval"]
    assert state["tables"] == 1
    assert "VmHWM" in dom and "<canvas id=\"memscope-chart\"" in dom
    assert "Decimated" not in dom


@needs_chromium
def test_replay_like_report_with_segment_map(pages: Path, artifacts: Path) -> None:
    state, dom = load(pages / "replay.html", artifacts)
    series = by_name(state)
    assert list(series) == ["allocated", "reserved", "live (requested)"]
    assert all(s["step"] for s in series.values())
    # The live line, which runs under "allocated", is dashed and drawn over it; the y axis
    # says what it measures.
    assert series["live (requested)"]["dashed"] and series["live (requested)"]["on_top"]
    assert not series["allocated"]["dashed"] and not series["allocated"]["on_top"]
    assert state["y_title"].startswith("memory")
    assert state["peak"]["series"] == "reserved"
    assert state["peak"]["t"] == pytest.approx(0.6)
    assert series["reserved"]["max"]["bytes"] == state["peak"]["bytes"] == 64 * MiB
    # 3 segments, then 42 that draw alike in a row (40 of one 20 MiB allocated block, 2 of two
    # allocated blocks filling 20 MiB): 4 rows, the last "20.00 MiB × 42".
    assert state["segments"] == 45
    assert state["segment_rows"] == 4
    assert state["blocks"] == 17 + 40 + 4
    assert state["bands"] == ["forward", "backward"]
    assert "Largest live allocations at the peak, by frame" in dom


@needs_chromium
def test_a_million_points_are_decimated_keeping_the_peak(pages: Path, artifacts: Path) -> None:
    path = pages / "million.html"
    assert path.stat().st_size < 2_000_000  # the points did not all go into the page
    state, dom = load(path, artifacts)
    (series,) = state["series"]
    assert series["original_points"] == 1_000_000
    assert 100 < series["points"] <= MAX_POINTS
    assert series["max"] == {"t": pytest.approx(654.321), "bytes": 1536 * MiB}
    assert state["peak"]["t"] == pytest.approx(654.321)
    assert state["peak"]["drawn"] is True
    assert "Decimated for drawing" in dom
    assert "allocated from 1,000,000 points" in dom


@needs_chromium
def test_report_with_no_series_has_no_chart(pages: Path, artifacts: Path) -> None:
    state, dom = load(pages / "empty.html", artifacts)
    assert state["series"] == [] and state["peak"] is None
    assert state["tables"] == 2
    assert "memscope-chart" not in dom.split("<script")[0]
    assert "train_mem_cpu_alloc_delta" in dom


@needs_chromium
def test_hostile_names_are_text(pages: Path, artifacts: Path) -> None:
    # The page's data keeps the bytes that are not UTF-8 as surrogate escapes (\udcff \udcfe,
    # Python's surrogateescape), so they round-trip (docs/cli.md, "Inputs and outputs").
    evil = b"</script><b>bold</b><!-- \"quoted\" 'single' & \xff\xfe end".decode(
        "utf-8", "surrogateescape")
    raw = (pages / "hostile.html").read_bytes()
    raw.decode("utf-8")  # valid UTF-8, though the names were not
    assert b"<b>bold</b>" not in raw
    state, dom = load(pages / "hostile.html", artifacts)
    assert ("pid 100 " + evil) in by_name(state)
    assert state["peak"]["label"] == "peak " + evil
    assert "train " + evil in state["bands"]
    assert state["segments"] == 1
    assert "<b>bold</b>" not in dom  # no element was made of a name


@needs_chromium
def test_report_json_round_trip_renders_the_same(pages: Path, artifacts: Path) -> None:
    # The fixture wrote run.html from the Report and roundtrip.html from its JSON read back.
    assert (pages / "roundtrip.html").read_bytes() == (pages / "run.html").read_bytes()
    data = json.loads((pages / "report.json").read_text())
    assert data["format"] == "memscope-report" and data["version"] == 1


# Hovers the chart at the peak marker (through the page's own interaction mode, as a pointer
# would) and records the tooltip's lines in <pre id="memscope-probe">.
_HOVER_PROBE = """<script>
window.addEventListener('load', () => setTimeout(() => {
  const chart = Chart.getChart(document.getElementById('memscope-chart'));
  const peak = chart.data.datasets.findIndex((d) => d.memscopePeak);
  const el = chart.getDatasetMeta(peak).data[0];
  const items = Chart.Interaction.modes.memscopeTime(
      chart, {type: 'mousemove', native: {}, x: el.x, y: el.y + 5});
  chart.tooltip.setActiveElements(items, {x: el.x, y: el.y});
  chart.update();
  const tip = chart.tooltip;
  const pre = document.createElement('pre');
  pre.id = 'memscope-probe';
  pre.textContent = JSON.stringify({title: tip.title, footer: tip.footer,
                                    body: tip.body.map((b) => b.lines.join(' '))});
  document.body.appendChild(pre);
}, 100));
</script></body>"""


@needs_chromium
def test_hover_shows_every_line_and_the_stage(pages: Path) -> None:
    text = (pages / "run.html").read_text(encoding="utf-8").replace("</body>", _HOVER_PROBE)
    page = load_page(text)
    assert page.errors == [], page.errors
    m = re.search(r'<pre id="memscope-probe">(.*?)</pre>', page.dom, re.DOTALL)
    assert m, "the probe did not run"
    tip = json.loads(html.unescape(m.group(1)))
    assert tip["title"] == ["t = 6.000 s"]
    assert tip["body"] == ["GPU used (device 0): 2.00 GiB", "tree RSS (sampled): 900.0 MiB",
                           "peak 900 MiB at 6.000 s (stage train)", "pid 100 RSS: 600.0 MiB",
                           "pid 101 RSS: 300.0 MiB"]
    assert tip["footer"] == ["stage train: pid 100, 6.0 s, peak 900 MiB"]


def command_page(args: list[str], out: Path, artifacts: Path, timeout: float) -> dict:
    if not CLI.exists():
        pytest.skip(f"{CLI} is not built")
    result = memscope(*args, timeout=timeout)
    if result.returncode != 0 or not out.exists():
        pytest.skip(f"memscope {' '.join(map(str, args))} wrote no page yet (exit "
                    f"{result.returncode}: {result.stderr.strip()[-300:]})")
    state, _ = load(out, artifacts)
    return state


@needs_chromium
def test_replay_html_of_the_real_trace(real_trace: Path, artifacts: Path) -> None:
    out = artifacts / "replay.html"
    out.unlink(missing_ok=True)
    state = command_page(["replay", str(real_trace), "--html", str(out)], out, artifacts, 300)
    series = by_name(state)
    assert {"reserved", "allocated", "live (requested)"} <= set(series)
    assert all(s["points"] <= MAX_POINTS for s in series.values())
    assert state["peak"]["series"] == "reserved"
    assert series["reserved"]["max"]["bytes"] == state["peak"]["bytes"]
    assert state["segments"] > 0 and state["blocks"] >= state["segments"]


@needs_chromium
def test_run_html_of_a_python_child(artifacts: Path) -> None:
    out = artifacts / "run.html"
    out.unlink(missing_ok=True)
    child = "import time; b = bytearray(64 << 20); time.sleep(0.5)"
    state = command_page(["run", "--interval", "50", "--html", str(out), "--",
                          sys.executable, "-c", child], out, artifacts, 120)
    series = by_name(state)
    assert "tree RSS (sampled)" in series
    assert state["peak"]["series"] == "tree RSS (sampled)"
    assert state["peak"]["bytes"] >= 64 * MiB


@needs_chromium
def test_report_html_of_saved_run_and_metrics(artifacts: Path) -> None:
    run_json = artifacts / "run.json"
    run_json.unlink(missing_ok=True)
    result = memscope("run", "--json", run_json, "--", sys.executable, "-c", "pass", timeout=120)
    if result.returncode != 0 or not run_json.exists():
        pytest.skip(f"memscope run --json wrote nothing yet: {result.stderr.strip()[-300:]}")
    out = artifacts / "report-run.html"
    out.unlink(missing_ok=True)
    state = command_page(["report", run_json, "--html", out], out, artifacts, 120)
    assert "tree RSS (sampled)" in by_name(state)

    metrics = artifacts / "train_results.json"
    metrics.write_text(json.dumps({"train_mem_cpu_alloc_delta": 12 * MiB,
                                   "train_mem_cpu_peaked_delta": 3 * MiB,
                                   "eval_mem_gpu_alloc_delta": 0, "train_runtime": 1.5}))
    out = artifacts / "report-metrics.html"
    out.unlink(missing_ok=True)
    state = command_page(["report", metrics, "--html", out], out, artifacts, 120)
    assert state["series"] == [] and state["tables"] == 2  # train and eval, no chart
