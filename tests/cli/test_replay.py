"""End-to-end tests of `memscope replay` on the repository's real PyTorch snapshot.

The figures the command prints are checked against the library's own replay through the
Python package (when the build has it), so a wrong option mapping or a dropped row shows.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import MiB, memscope

GiB = 1024 * MiB


def python_trace(real_trace: Path):
    memscope_py = pytest.importorskip("memscope")
    return memscope_py.load_trace(real_trace)


def test_text_names_the_peak_and_the_sites(real_trace: Path) -> None:
    result = memscope("replay", real_trace, check=True)
    out = result.stdout
    assert re.search(r"peak reserved\s+\d+\.\d\d GiB at event [\d,]+", out), out
    assert re.search(r"Live at peak live( and peak reserved)?, event [\d,]+", out), out
    assert "model.py:39 forward" in out  # the real trace's largest site at the peak
    assert result.stderr == ""  # no progress when piped


def test_text_matches_the_library(real_trace: Path) -> None:
    expected = python_trace(real_trace).replay()
    out = memscope("replay", real_trace, check=True).stdout
    assert expected.top_sites[0].where in out
    assert f"event {expected.peak.event:,}" in out


def test_json_fields(real_trace: Path, artifacts: Path) -> None:
    path = artifacts / "replay.json"
    result = memscope("replay", real_trace, "--capacity", "40GiB", "--json", path, check=True)
    assert f"replay JSON: {path}" in result.stdout
    data = json.loads(path.read_text())
    assert data["format"] == "memscope-replay" and data["version"] == 2
    assert data["trace"] == str(real_trace)
    assert data["device"] == 0 and data["capacity"] == 40 * GiB
    assert data["capacity_given"] is True and data["fits"] is True
    (row,) = data["rows"]
    assert row["config"] == "" and row["ooms"] == 0 and row["fit"] is None
    assert 0 < row["peak_requested"] <= row["peak_allocated"] <= row["peak_reserved"]
    assert row["ratio"] == pytest.approx(row["peak_reserved"] / row["peak_requested"])
    assert data["peak"]["reserved"] == row["peak_reserved"]
    assert data["peak_live"]["live"] == row["peak_requested"]
    assert data["top_sites"] == data["peak_live"]["top_sites"]
    assert data["top_sites"][0]["where"] == "model.py:39 forward"
    for moment in (data["peak"], data["peak_live"]):
        assert sum(s["bytes"] for s in moment["top_sites"]) <= moment["live"]
    assert "report" in data


def test_json_matches_the_library(real_trace: Path, artifacts: Path) -> None:
    expected = python_trace(real_trace).replay(capacity="40GiB")
    path = artifacts / "replay.json"
    memscope("replay", real_trace, "--capacity", "40GiB", "--json", path, check=True)
    row = json.loads(path.read_text())["rows"][0]
    assert row["peak_reserved"] == expected.peak_reserved
    assert row["peak_requested"] == expected.peak_live
    assert row["segments"] == expected.segments


def test_fit_prints_the_smallest_capacity(real_trace: Path, artifacts: Path) -> None:
    path = artifacts / "fit.json"
    result = memscope("replay", real_trace, "--fit", "--json", path, check=True)
    fit = json.loads(path.read_text())["rows"][0]["fit"]
    assert fit["fits"] is True
    capacity = fit["capacity"]
    assert capacity % (2 * MiB) == 0 and capacity >= fit["lower_bound"]
    match = re.search(r"smallest device that fits\s+(\d+\.\d\d) GiB", result.stdout)
    assert match, result.stdout
    assert float(match.group(1)) == pytest.approx(capacity / GiB, abs=0.005)
    # The answer holds: it fits there and not 2 MiB below.
    probes = {c: ok for c, ok in fit["probes"]}
    assert probes[capacity] is True
    assert probes.get(capacity - 2 * MiB, False) is False


def test_fit_capacity_replays_without_oom_and_less_does_not(real_trace: Path) -> None:
    trace = python_trace(real_trace)
    capacity = trace.fit().capacity
    fits = memscope("replay", real_trace, "--capacity", f"{capacity}B")
    assert fits.returncode == 0, fits.stderr
    assert "fits in" in fits.stdout
    short = memscope("replay", real_trace, "--capacity", f"{capacity - 2 * MiB}B")
    assert short.returncode == 1


def test_too_small_capacity_exits_1_with_the_first_oom(real_trace: Path, artifacts: Path) -> None:
    path = artifacts / "oom.json"
    result = memscope("replay", real_trace, "--capacity", "4GiB", "--json", path)
    assert result.returncode == 1, result.stderr
    assert re.search(r"verdict\s+does not fit in 4\.00 GiB: first OOM at (event [\d,]+|the "
                     r"starting live set)", result.stdout), result.stdout
    assert re.search(r"first out of memory\s+(event [\d,]+|the starting live set)", result.stdout)
    assert "allocations refused" in result.stdout
    data = json.loads(path.read_text())
    assert data["fits"] is False
    assert data["rows"][0]["ooms"] > 0 and data["rows"][0]["first_oom"]["request"] > 0


def test_several_configs_give_one_row_each(real_trace: Path, artifacts: Path) -> None:
    configs = ["default", "max_split_size:256MiB", "roundup_power2_divisions:4"]
    args = [a for c in configs for a in ("--config", c)]
    path = artifacts / "settings.json"
    result = memscope("replay", real_trace, *args, "--json", path, check=True)
    lines = result.stdout.splitlines()
    head = next(i for i, line in enumerate(lines)
                if line.strip().startswith("settings") and "peak reserved" in line)
    rows = lines[head + 2:head + 2 + len(configs)]  # under the titles and their rule
    assert [r.split()[0] for r in rows] == ["(defaults)", *configs[1:]]
    data = json.loads(path.read_text())
    assert [r["config"] for r in data["rows"]] == ["", *configs[1:]]
    # The settings do change the replay: max_split_size keeps big blocks whole.
    assert len({r["peak_reserved"] for r in data["rows"]}) > 1


def test_html_report_is_written(real_trace: Path, artifacts: Path) -> None:
    path = artifacts / "replay.html"
    result = memscope("replay", real_trace, "--html", path, check=True)
    assert f"HTML report: {path}" in result.stdout
    assert path.read_text().lstrip().lower().startswith("<!doctype html")


def test_malformed_trace_exits_3_naming_it(real_trace: Path, tmp_path: Path) -> None:
    bad = tmp_path / "truncated.pickle"
    bad.write_bytes(real_trace.read_bytes()[:5000])
    result = memscope("replay", bad)
    assert result.returncode == 3
    assert str(bad) in result.stderr


def test_not_a_trace_exits_3(tmp_path: Path) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("hello\n")
    result = memscope("replay", bad)
    assert result.returncode == 3
    assert str(bad) in result.stderr and "RMM" in result.stderr


def test_a_python_script_is_not_a_trace(tmp_path: Path) -> None:
    # 'i' of "import" is a pickle opcode: this was read as a pickle and refused for an opcode.
    script = tmp_path / "some.py"
    script.write_text("import torch\n\nprint(torch.cuda.is_available())\n")
    result = memscope("replay", script)
    assert result.returncode == 3
    assert f"{script}: not a trace: it looks like Python source (first line 'import torch')" \
        in result.stderr, result.stderr
    assert "PyTorch memory snapshot pickle" in result.stderr


def test_missing_file_exits_3(tmp_path: Path) -> None:
    result = memscope("replay", tmp_path / "nope.pickle")
    assert result.returncode == 3
    assert "nope.pickle" in result.stderr and "no such file" in result.stderr


@pytest.mark.parametrize("size", ["24x", "GiB", "-3GiB", "0", "24", "1.5"])
def test_bad_capacity_exits_2(real_trace: Path, size: str) -> None:
    result = memscope("replay", real_trace, "--capacity", size)
    assert result.returncode == 2, result.stderr
    # An example with its unit: "24GiB", or the number given with one ("0GiB").
    assert "--capacity" in result.stderr and ("24GiB" in result.stderr
                                              or f"{size}GiB" in result.stderr)


@pytest.mark.parametrize("option", ["--capacity", "--precision"])
def test_a_size_without_its_unit_is_refused_not_read_as_bytes(real_trace: Path,
                                                               option: str) -> None:
    result = memscope("replay", real_trace, option, "24")
    assert result.returncode == 2, result.stdout
    assert f"{option}: '24' has no unit" in result.stderr, result.stderr
    assert "24GiB" in result.stderr and "24B for bytes" in result.stderr


def test_one_numbering_in_text_json_and_html(real_trace: Path, artifacts: Path) -> None:
    path = artifacts / "numbering.json"
    result = memscope("replay", real_trace, "--json", path, check=True)
    data = json.loads(path.read_text())
    for key, label in (("peak", "peak reserved"), ("peak_live", r"peak live \(requested\)")):
        event = data[key]["event"]
        assert re.search(rf"{label}\s+[\d.]+ GiB at event {event:,}\b", result.stdout), \
            result.stdout
    report = data["report"]
    assert report["segment_map"]["title"].startswith(f"Segments at peak reserved, event "
                                                     f"{data['peak']['event']:,}")
    assert report["peak"]["label"].startswith(f"peak reserved ") and \
        f"event {data['peak']['event']:,}" in report["peak"]["label"]
    summary = dict(report["summary"])
    assert "operations" not in summary
    assert summary["allocations and frees"] == "3,442"
    assert summary["blocks live when recording began"] == "229"
    assert re.search(r"allocations and frees\s+3,442\n", result.stdout), result.stdout
    assert re.search(r"blocks live when recording began\s+229\n", result.stdout), result.stdout
    tables = [t["title"] for t in report["tables"]]
    if data["peak"]["event"] == data["peak_live"]["event"]:
        assert f"Live at peak live and peak reserved, event {data['peak']['event']:,}" \
            in result.stdout
        assert any(t.startswith("Live at peak live and peak reserved, event ") for t in tables)
    else:
        assert any(t.startswith("Live at peak live, event ") for t in tables), tables
        assert any(t.startswith("Live at peak reserved, event ") for t in tables), tables


def test_fit_table_is_sorted_and_per_setting(real_trace: Path, artifacts: Path) -> None:
    path = artifacts / "fit-table.json"
    configs = ["default", "max_split_size:256MiB"]
    args = [a for c in configs for a in ("--config", c)]
    memscope("replay", real_trace, *args, "--fit", "--precision", "64MiB", "--json", path,
             check=True)
    data = json.loads(path.read_text())
    (table,) = [t for t in data["report"]["tables"] if t["title"].startswith("Would it fit")]
    assert table["columns"][:2] == ["settings", "capacity"]
    settings = [row[0] for row in table["rows"]]
    assert settings == sorted(settings, key=["(defaults)", configs[1]].index)
    for name, row in zip(["(defaults)", configs[1]], data["rows"]):
        capacities = [r[1] for r in table["rows"] if r[0] == name]
        probes = sorted({c for c, _ in row["fit"]["probes"]})
        assert len(capacities) == len(probes)
        assert capacities == [f"{c // MiB}MiB" if c % GiB else f"{c // GiB}GiB" for c in probes]


def test_bad_config_exits_2_naming_the_key(real_trace: Path) -> None:
    result = memscope("replay", real_trace, "--config", "max_split_sise:256MiB")
    assert result.returncode == 2
    assert "--config" in result.stderr and "max_split_sise" in result.stderr


def test_unknown_device_exits_2(real_trace: Path) -> None:
    result = memscope("replay", real_trace, "--device", "5")
    assert result.returncode == 2
    assert "--device 5" in result.stderr and "devices 0" in result.stderr


def test_unwritable_json_exits_4_and_writes_nothing(real_trace: Path, tmp_path: Path) -> None:
    target = tmp_path / "missing-folder" / "out.json"
    result = memscope("replay", real_trace, "--json", target)
    assert result.returncode == 4
    assert str(target) in result.stderr
    assert not target.parent.exists()
