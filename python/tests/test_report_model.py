"""memscope.Report: the report layer's model built in Python and rendered by the library's own
renderers (text, JSON, HTML), the same ones the memscope command uses. Costs well under 1 s."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import memscope


def _report() -> memscope.Report:
    table = memscope.ReportTable(title="Live by site", columns=["where", "bytes"],
                                 rows=[["model.py:88 forward", "40.00 MiB"],
                                       ["train.py:12 step", "1.00 KiB"]],
                                 numeric=[False, True], note="two sites")
    series = memscope.ReportSeries("allocated", [0.0, 1.0, 2.0], [0.0, 1024.0, 512.0], step=True)
    return memscope.Report(title="Estimate", subtitle="a test", summary=[("peak", "40 MiB")],
                           tables=[table], notes=["a note"], series=[series],
                           peak=memscope.ReportMarker("allocated", 1.0, 1024.0, "peak"))


def test_text_is_the_library_rendering() -> None:
    text = _report().to_text()
    lines = text.splitlines()
    assert lines[0] == "Estimate"
    assert "  peak  40 MiB" in lines and "Live by site:" in lines
    # Numeric columns right-aligned, text left-aligned, by the one table renderer.
    assert "  model.py:88 forward  40.00 MiB" in lines
    assert "  train.py:12 step      1.00 KiB" in lines
    assert "  (two sites)" in lines and text.rstrip().endswith("a note")
    assert _report().tables[0].to_text().splitlines()[0].split() == ["where", "bytes"]


def test_json_round_trip_and_envelope(tmp_path: Path) -> None:
    r = _report()
    data = json.loads(r.to_json())
    assert data["format"] == "memscope-report" and data["version"] == 1
    back = memscope.Report.from_json(r.to_json(indent=2))
    assert back.to_text() == r.to_text()
    assert back.series[0].bytes == [0.0, 1024.0, 512.0] and back.peak is not None
    r.write_json(tmp_path / "r.json")
    assert memscope.Report.from_json((tmp_path / "r.json").read_text()).title == "Estimate"


def test_html_page(tmp_path: Path) -> None:
    page = _report().to_html()
    assert page.startswith("<!doctype html>") and "model.py:88 forward" in page
    _report().write_html(tmp_path / "r.html")
    assert (tmp_path / "r.html").read_text() == page
    with pytest.raises(memscope.Error, match="missing"):
        _report().write_html(tmp_path / "missing" / "r.html")
    assert not (tmp_path / "missing").exists()


def test_building_piece_by_piece() -> None:
    r = memscope.Report(title="t")
    r.add_summary("k", "v")
    r.add_table(memscope.ReportTable(columns=["", ""], rows=[["a", "1"]]))
    r.add_note("n")
    r.add_series(memscope.ReportSeries("s", [0.0], [1.0]))
    assert [t.rows for t in r.tables] == [[["a", "1"]]]
    assert r.summary == [("k", "v")] and r.notes == ["n"] and len(r.series) == 1
    r.summary = [("x", "y")]  # properties are copies: assign to change
    assert "  x  y" in r.to_text().splitlines()


def test_bad_values_are_refused_where_they_are_made() -> None:
    with pytest.raises(ValueError, match="row 0 has 1 cells for 2 columns"):
        memscope.ReportTable(title="t", columns=["a", "b"], rows=[["1"]])
    with pytest.raises(ValueError, match="t has 2 points and bytes 1"):
        memscope.ReportSeries("s", [0.0, 1.0], [1.0])
    r = memscope.Report(tables=[memscope.ReportTable(columns=["a"], rows=[["1"]])])
    t = r.tables[0]
    t.rows = [["1", "2"]]
    r.tables = [t]
    with pytest.raises(ValueError, match="row 0 has 2 cells for 1 columns"):
        r.to_text()


def test_damaged_json_names_the_source_and_field() -> None:
    with pytest.raises(memscope.ReportFormatError, match="saved.json: not JSON"):
        memscope.Report.from_json("{", source="saved.json")
    with pytest.raises(memscope.ReportFormatError, match="saved.json"):
        memscope.Report.from_json('{"format": "memscope-run", "version": 1}', source="saved.json")
    bad = json.loads(_report().to_json())
    bad["tables"][0]["title"] = 5
    with pytest.raises(ValueError, match=r"tables\[0\]\.title"):
        memscope.Report.from_json(json.dumps(bad))
