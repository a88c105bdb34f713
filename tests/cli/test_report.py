"""End-to-end tests of `memscope report`: each kind of file told by its content, shown as text
and as HTML, and the files it refuses."""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import pytest
import trace_corpus
from conftest import MiB, memscope
from run_records import write_run

# The Trainer's layout: what Hugging Face's save_metrics writes, by hand.
TRAINER_METRICS = {
    "epoch": 3.0,
    "train_runtime": 125.4,
    "train_samples_per_second": 81.25,
    "train_mem_cpu_alloc_delta": 100 * MiB,
    "train_mem_cpu_peaked_delta": 12 * MiB,
    "train_mem_gpu_alloc_delta": 2048 * MiB,
    "train_mem_gpu_peaked_delta": 512 * MiB,
    "init_mem_cpu_alloc_delta": 7 * MiB,
    "total_flos": 1.5e15,
}


def test_metrics_written_by_hand(tmp_path: Path) -> None:
    path = tmp_path / "train_results.json"
    path.write_text(json.dumps(TRAINER_METRICS))
    out = memscope("report", path, check=True).stdout
    assert "***** train metrics *****" in out
    for key in TRAINER_METRICS:
        assert key in out
    assert "2048.00 MiB" in out  # one unit for the memory column


def test_metrics_match_the_library_table(tmp_path: Path) -> None:
    memscope_py = pytest.importorskip("memscope")
    memscope_py.save_metrics("eval", {"eval_loss": 0.25, "eval_mem_gpu_alloc_delta": 3 * MiB},
                             tmp_path)
    out = memscope("report", tmp_path / "eval_results.json", check=True).stdout
    from memscope._memscope import format_metrics_table  # the C++ function the CLI calls

    expected = format_metrics_table("eval",
                                    memscope_py.load_metrics(tmp_path / "eval_results.json"))
    assert out == expected
    # all_results.json is saved metrics too (the split is "all").
    out = memscope("report", tmp_path / "all_results.json", check=True).stdout
    assert "***** all metrics *****" in out and "eval_loss" in out


def test_metrics_of_the_default_tracker(tmp_path: Path) -> None:
    """Issue 27: the README's Tracker() on a machine without a GPU put the unavailable GPU's
    230-character reason in every stage's metrics. Saved and reported, they are numbers only,
    and the report's values are not padded to any text."""
    memscope_py = pytest.importorskip("memscope")
    t = memscope_py.Tracker()
    for stage in ("train", "eval"):
        with t.stage(stage):
            pass
    t.save_metrics("all", tmp_path)
    saved = json.loads((tmp_path / "all_results.json").read_text())
    assert saved and all(isinstance(v, (int, float)) for v in saved.values()), saved
    out = memscope("report", tmp_path / "all_results.json", check=True).stdout
    assert "train_mem_cpu_alloc_delta" in out and "_mode" not in out
    assert max(len(line) for line in out.splitlines()) < 80, out
    from memscope.distributed import _check  # what gather() accepts: numbers only

    assert _check(t.metrics) == t.metrics


def test_metrics_html(tmp_path: Path, artifacts: Path) -> None:
    path = tmp_path / "train_results.json"
    path.write_text(json.dumps(TRAINER_METRICS))
    html = artifacts / "metrics.html"
    result = memscope("report", path, "--html", html, check=True)
    assert f"HTML report: {html}" in result.stdout
    assert html.read_text().lstrip().lower().startswith("<!doctype html")


def test_a_large_metrics_file_makes_a_bounded_page(tmp_path: Path) -> None:
    """Issue 44.12: a 196 MB metrics file made a 363 MB page. The page keeps
    the first 5,000 keys (HtmlOptions::max_table_rows) and says so; the text has them all. A
    9 MB file of 200,000 keys here; costs about 2 s."""
    keys = 200_000
    a = {f"train_mem_gpu_step{i:07d}_alloc_delta": i * 4096 for i in range(keys)}
    a["train_loss"] = float("nan")
    path = tmp_path / "train_results.json"
    path.write_text(json.dumps(a, indent=4, sort_keys=True))
    assert path.stat().st_size > 8_000_000
    html = tmp_path / "page.html"
    result = memscope("report", path, "--html", html, check=True)
    assert "train_mem_gpu_step0199999_alloc_delta" in result.stdout  # the text has every key
    page = html.read_text()
    empty = tmp_path / "empty.html"
    (tmp_path / "none_results.json").write_text("{}")
    memscope("report", tmp_path / "none_results.json", "--html", empty, check=True)
    assert len(page) - empty.stat().st_size < 1_000_000, len(page)
    assert page.count("<tr><td") == 5000
    assert f"The page shows the first 5000 of {keys + 1} keys" in page
    b = dict(a, train_mem_gpu_step0000007_alloc_delta=1 << 30)
    other = tmp_path / "b.json"
    other.write_text(json.dumps(b))
    result = memscope("diff", path, other, "--html", html, check=True)
    assert "train_mem_gpu_step0000007_alloc_delta" in result.stdout
    assert len(html.read_text()) - empty.stat().st_size < 100_000


def test_replay_json_from_replay(real_trace: Path, artifacts: Path) -> None:
    saved = artifacts / "replay.json"
    memscope("replay", real_trace, "--capacity", "40GiB", "--fit", "--json", saved, check=True)
    data = json.loads(saved.read_text())
    out = memscope("report", saved, check=True).stdout
    assert real_trace.name in out
    peak_line = next(line for line in out.splitlines() if "peak reserved" in line)
    gib = data["rows"][0]["peak_reserved"] / (1 << 30)
    assert f"{gib:.2f} GiB" in peak_line
    assert data["top_sites"][0]["where"] in out
    assert "fits in 40.00 GiB" in out
    html = artifacts / "replay-again.html"
    memscope("report", saved, "--html", html, check=True)
    assert html.stat().st_size > 0


def _tiny_trace(path: Path) -> Path:
    """A trace made here: two allocations under two stages, one freed, with frames."""
    frame = {"filename": "/home/u/model.py", "line": 7, "name": "forward"}
    events = [
        {"action": "alloc", "addr": 1 << 40, "size": 6 << 20, "stream": 0, "time_us": 1000,
         "frames": [frame]},
        {"action": "alloc", "addr": (1 << 40) + (8 << 20), "size": 3 << 20, "stream": 0,
         "time_us": 2000, "frames": [frame]},
        {"action": "free_completed", "addr": 1 << 40, "size": 6 << 20, "stream": 0,
         "time_us": 3000, "frames": [frame]},
    ]
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [events]}, protocol=4))
    return path


@pytest.mark.parametrize("which", ["made here", "corpus"])
@pytest.mark.parametrize("options", [[], ["--capacity", "8MiB"],
                                     ["--config", "default", "--config",
                                      "max_split_size:256MiB", "--fit"]])
def test_replay_text_is_the_report_of_its_json(which: str, options: list[str],
                                               tmp_path: Path) -> None:
    """Golden: `memscope replay X --json out.json` and `memscope report out.json` print the same
    text, because both render one Report (the one the JSON carries)."""
    trace = _tiny_trace(tmp_path / "t.pickle") if which == "made here" \
        else trace_corpus.trace_or_skip()
    saved = tmp_path / "out.json"
    replay = memscope("replay", trace, *options, "--json", saved)
    assert replay.returncode in (0, 1), replay.stderr  # 1: it does not fit in --capacity
    report = memscope("report", saved, check=True).stdout
    printed = replay.stdout.removesuffix(f"replay JSON: {saved}\n")
    assert printed != replay.stdout and "peak reserved" in printed
    assert report == printed


def newer(kind: str) -> dict:
    """A file of `kind` from a memscope newer than this one (version 99 of its envelope)."""
    if kind == "run":
        return {"format": "memscope-run", "version": 99}
    if kind == "replay":
        return {"format": "memscope-replay", "version": 99, "rows": []}
    # A current replay result holding a report from the future.
    return {"format": "memscope-replay", "version": 2, "report": {"format": "memscope-report",
                                                                   "version": 99}}


@pytest.mark.parametrize("kind", ["run", "replay", "report"])
def test_a_newer_version_of_each_kind_is_refused_saying_to_upgrade(tmp_path: Path,
                                                                   kind: str) -> None:
    path = tmp_path / "future.json"
    path.write_text(json.dumps(newer(kind)))
    result = memscope("report", path)
    assert result.returncode == 3
    assert f"{path}: memscope-{kind} version 99" in result.stderr, result.stderr
    assert "written by a newer memscope" in result.stderr and "upgrade memscope" in result.stderr


@pytest.mark.parametrize("report,field", [
    (None, "field 'report' is missing"),
    ({"format": "memscope-report", "version": 1, "title": "t", "subtitle": "", "summary": [],
      "x_label": "", "series": [], "bands": [], "peak": None, "segment_map": None,
      "tables": [{"columns": []}], "notes": []}, "field 'report.tables[0].title' is missing"),
])
def test_replay_json_missing_a_field_names_it(tmp_path: Path, report: dict | None,
                                              field: str) -> None:
    path = tmp_path / "cut.json"
    saved = {"format": "memscope-replay", "version": 2, "trace": "t", "device": 0,
             "capacity": 1 << 30, "rows": [{"config": ""}]}
    if report is not None:
        saved["report"] = report
    path.write_text(json.dumps(saved))
    result = memscope("report", path)
    assert result.returncode == 3
    assert f"{path}: {field} (a memscope replay result" in result.stderr, result.stderr


def test_run_written_by_hand(tmp_path: Path, artifacts: Path) -> None:
    path = write_run(tmp_path / "run.json", stages={"train": 700 * MiB, "eval": 300 * MiB},
                     processes={"python3 train.py": 650 * MiB, "dataloader worker": 120 * MiB})
    out = memscope("report", path, check=True).stdout
    for text in ("python3 train.py", "dataloader worker", "650.00 MiB", "train", "eval"):
        assert text in out
    html = artifacts / "run.html"
    memscope("report", path, "--html", html, check=True)
    assert html.read_text().lstrip().lower().startswith("<!doctype html")


def test_run_recorded_by_memscope_run(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    child = [sys.executable, "-c", "x = bytearray(64 << 20); x[::4096] = b'1' * len(x[::4096])"]
    memscope("run", "--json", path, "--", *child, check=True)
    out = memscope("report", path, check=True).stdout
    recorded = json.loads(path.read_text())
    pid = recorded["processes"][0]["pid"]
    assert str(pid) in out and "peak RSS" in out
    peak = recorded["processes"][0]["peak_rss"]
    assert peak >= 64 * MiB  # the child touched every page of 64 MiB


def test_trace_is_replayed_with_the_defaults(real_trace: Path) -> None:
    report = memscope("report", real_trace, check=True).stdout
    replay = memscope("replay", real_trace, check=True).stdout
    assert report == replay


def test_unknown_kind_exits_3_listing_the_kinds(tmp_path: Path) -> None:
    path = tmp_path / "nested.json"
    path.write_text(json.dumps({"a": {"b": 1}}))
    result = memscope("report", path)
    assert result.returncode == 3
    for kind in ("saved metrics", "run recording", "replay result", "trace"):
        assert kind in result.stderr
    assert str(path) in result.stderr


def test_malformed_json_exits_3_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"train_runtime": 1.5,')
    result = memscope("report", path)
    assert result.returncode == 3
    assert str(path) in result.stderr and "not valid JSON" in result.stderr


def test_number_too_big_for_a_double_exits_3_naming_the_file(tmp_path: Path) -> None:
    # nlohmann's number overflow is an out_of_range, not a parse_error: it escaped the reader and
    # aborted the command (found by fuzz_cli_json, issue 29).
    path = tmp_path / "huge.json"
    path.write_text('{"train_runtime": 2e578}')
    result = memscope("report", path)
    assert result.returncode == 3, result.stderr
    assert str(path) in result.stderr and "not valid JSON" in result.stderr


def test_malformed_run_names_the_field(tmp_path: Path) -> None:
    path = write_run(tmp_path / "run.json", stages={}, processes={"a": MiB})
    data = json.loads(path.read_text())
    data["processes"][0]["peak_rss"] = "big"
    path.write_text(json.dumps(data))
    result = memscope("report", path)
    assert result.returncode == 3
    assert "peak_rss" in result.stderr


def test_missing_file_exits_3(tmp_path: Path) -> None:
    result = memscope("report", tmp_path / "gone.json")
    assert result.returncode == 3
    assert "gone.json" in result.stderr
