"""memscope.Trace: loading traces, replaying them on a simulated device, the peak explained,
settings side by side and the smallest device a trace fits on. The real PyTorch trace in
the corpus (its README gives the reference numbers) is found through MEMSCOPE_TRACES; the tests
that need it skip with the reason without it."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

import memscope

MiB = 1 << 20
GiB = 1 << 30


@pytest.fixture(scope="module")
def real(real_trace: Path) -> memscope.Trace:
    return memscope.load_trace(real_trace)


def test_load_gives_the_trace_and_its_counts(real: memscope.Trace, real_trace: Path) -> None:
    assert isinstance(real, memscope.Trace)
    assert real.devices == [0]
    assert real.events == [5163]
    assert real.segments == 216
    assert real.dropped_events == 0
    assert repr(real) == "<memscope.Trace: 1 device, 5163 events, 216 segments>"
    assert memscope.load_trace(str(real_trace)).events == [5163]  # str or Path


def test_replay_gives_the_known_peaks_and_where_they_are(real: memscope.Trace) -> None:
    r = real.replay(capacity="24GiB")
    assert isinstance(r, memscope.ReplayResult)
    assert r.peak_live == 13_923_997_700  # the corpus README
    assert r.peak_reserved == 14_088_667_136
    assert round(r.reserved_over_peak_live, 4) == 1.0118
    assert r.capacity == 24 * GiB
    assert (r.device, r.config, r.oom, r.ooms, r.first_oom) == (0, "", False, 0, None)
    assert r.operations == 3671 and r.starting_blocks == 229
    assert r.peak.event is not None and r.peak.time_us > 0
    assert r.peak.reserved_bytes == r.peak_reserved
    # What was live is broken down at both peaks; the shortcuts are peak live's.
    assert r.peak.live_bytes == r.at_peak_reserved.bytes <= r.peak_live
    assert r.live_peak.live_bytes == r.peak_live == r.live_at_peak == r.at_peak_live.bytes
    assert r.live_at_peak_count == r.at_peak_live.count > 0
    assert [s.where for s in r.top_sites] == [s.where for s in r.at_peak_live.top_sites]
    for live in (r.at_peak_live, r.at_peak_reserved):
        assert isinstance(live, memscope.LiveBreakdown)
        assert 0 < len(live.top_sites) <= 10
        sizes = [s.bytes for s in live.top_sites]
        assert sizes == sorted(sizes, reverse=True)
        assert sum(sizes) <= live.bytes
        assert {s.origin for s in live.top_sites} <= {"traced", "before_recording",
                                                      "freed_in_trace"}
    text = r.explain()
    assert str(r) == text
    assert "peak reserved" in text and f"event {r.peak.event:,}" in text
    assert r.top_sites[0].where in text


def test_sizes_as_text_or_bytes_and_bad_arguments(real: memscope.Trace) -> None:
    as_bytes, as_text = real.replay(capacity=24 * GiB), real.replay(capacity="24GiB")
    assert as_bytes.peak_reserved == as_text.peak_reserved
    with pytest.raises(memscope.ConfigError, match="lots"):
        real.replay(capacity="lots")
    with pytest.raises(memscope.ConfigError, match="'24' has no unit"):
        real.replay(capacity="24")  # 24 GiB meant, not 24 bytes
    with pytest.raises(ValueError, match="negative"):
        real.replay(capacity=-1)
    with pytest.raises(TypeError, match="capacity"):
        real.replay(capacity=2.5)  # type: ignore[arg-type]
    with pytest.raises(memscope.ConfigError, match="no_such_key"):
        real.replay(config="no_such_key:1")
    with pytest.raises(memscope.TraceFormatError, match="device 3"):
        real.replay(device=3)


def test_out_of_memory_is_located(real: memscope.Trace) -> None:
    r = real.replay(capacity="12GiB")
    assert r.oom and r.ooms > 0
    assert r.first_oom is not None and r.first_oom.event is not None
    assert r.first_oom.request > 0
    assert "allocations refused" in r.explain()


def test_every_device(real: memscope.Trace) -> None:
    results = real.replay(device=None)
    assert isinstance(results, list) and [r.device for r in results] == [0]


def test_compare_settings_side_by_side(real: memscope.Trace) -> None:
    configs = ["", "max_split_size_mb:256", "garbage_collection_threshold:0.8"]
    c = real.compare(configs, capacity="16GiB", fit=True, precision="64MiB")
    assert len(c) == 3
    assert [r.config for r in c.results] == configs
    assert c[-1].config == configs[-1]
    assert all(r.peak_live == 13_923_997_700 for r in c.results)
    table = c.table()
    assert str(c) == table
    for name in ["(defaults)", "max_split_size_mb:256", "garbage_collection_threshold:0.8",
                 "smallest device"]:
        assert name in table
    fits = c.fits
    assert all(f is not None and f.fits and f.capacity % (64 * MiB) == 0 for f in fits)
    with pytest.raises(IndexError):
        c[3]


def test_fit_keeps_its_guarantee(real: memscope.Trace) -> None:
    f = real.fit(precision="16MiB")
    assert f.fits and f.capacity is not None and f.precision == 16 * MiB
    assert f.lower_bound == 13_923_997_700 <= f.capacity
    assert not real.replay(capacity=f.capacity).oom
    assert real.replay(capacity=f.capacity - f.precision).oom
    assert (f.capacity, True) in f.probes
    assert "fits on" in str(f)
    capped = real.fit(config="memory_limit:4GiB", precision="1GiB")
    assert not capped.fits and capped.capacity is None
    with pytest.raises(memscope.UsageError, match="precision"):
        real.fit(precision=0)


def test_unreadable_files_are_trace_format_errors(tmp_path: Path) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00not a trace")
    with pytest.raises(memscope.TraceFormatError, match=r"junk\.bin"):
        memscope.load_trace(junk)
    with pytest.raises(memscope.TraceFormatError, match=r"missing\.pickle"):
        memscope.load_trace(tmp_path / "missing.pickle")


def test_a_frame_line_beyond_64_bits_reads_as_unknown(tmp_path: Path) -> None:
    """PyTorch under Python 3.13 writes a line it does not know as 2**64 - 1 (LONG1 of nine
    bytes); the file is written here by Python's own pickle."""
    frames = [{"filename": "??", "line": 2**64 - 1, "name": "<unknown>"},
              {"filename": "train.py", "line": 12, "name": "step"}]
    events = [{"action": action, "addr": 4096, "size": 512, "stream": 0, "frames": frames}
              for action in ("alloc", "free_completed")]
    path = tmp_path / "py313.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [events]}, protocol=4))
    trace = memscope.load_trace(path)
    assert trace.events == [2]
    assert trace.replay().peak_live == 512
    data = json.loads(trace.to_json())
    lines = [f["line"] for f in data["device_traces"][0][0]["frames"]]
    assert lines == [0, 12]  # 0: unknown


def _allocate_activations(alloc: memscope.Allocator) -> list[int]:
    out = []
    for _ in range(3):  # a loop, not a comprehension: its frame is this function's
        out.append(alloc.alloc(100 * MiB))
    return out


def test_a_recording_replays_and_names_the_python_code_that_allocated() -> None:
    alloc = memscope.Allocator("sim:8GiB", config="")
    alloc.start_recording(stacks="python")
    weights = alloc.alloc(200 * MiB)
    activations = _allocate_activations(alloc)
    for p in activations:
        alloc.free(p)
    alloc.free(weights)
    trace = alloc.recorded_snapshot()
    assert isinstance(trace, memscope.Trace)
    r = trace.replay(capacity="1GiB")
    assert r.peak_live == 500 * MiB
    assert r.live_at_peak == 500 * MiB
    top = r.top_sites[0]
    assert (top.name, top.bytes, top.count) == ("_allocate_activations", 300 * MiB, 3)
    assert top.filename.endswith("test_trace.py")
    this_test = "test_a_recording_replays_and_names_the_python_code_that_allocated"
    assert r.top_sites[1].name == this_test


def test_a_dumped_recording_loads_and_replays_the_same(tmp_path: Path) -> None:
    alloc = memscope.Allocator("sim:8GiB", config="")
    alloc.start_recording()
    kept = [alloc.alloc((i % 7 + 1) * MiB) for i in range(40)]
    for p in kept[::2]:
        alloc.free(p)
    direct = alloc.recorded_snapshot().replay(capacity="1GiB")
    for name in ["snap.pickle", "snap.json"]:
        alloc.dump_snapshot(tmp_path / name)
        loaded = memscope.load_trace(tmp_path / name).replay(capacity="1GiB")
        assert (loaded.peak_reserved, loaded.peak_live, loaded.peak.op) == (
            direct.peak_reserved, direct.peak_live, direct.peak.op)
    for p in kept[1::2]:
        alloc.free(p)


@pytest.mark.parametrize("protocol", [2, 3, 4])
def test_saved_and_serialized_traces_are_the_same_snapshot(
    real: memscope.Trace, tmp_path: Path, protocol: int
) -> None:
    data = pickle.loads(real.to_pickle(protocol))
    assert set(data) >= {"segments", "device_traces"}
    assert len(data["segments"]) == real.segments
    assert [len(d) for d in data["device_traces"]] == real.events
    assert json.loads(real.to_json()) == json.loads(json.dumps(data))  # tuples become lists
    for name in ("t.pickle", "t.json"):
        real.save(tmp_path / name)
        again = memscope.load_trace(tmp_path / name)
        assert again.events == real.events and again.segments == real.segments
        assert str(again.replay()) == str(real.replay())
    with pytest.raises(memscope.UsageError, match="protocol"):
        real.to_pickle(5)


def test_writers_keep_links_fifos_and_modes(tmp_path: Path) -> None:
    """Issue 29.4: dump_snapshot, Trace.save and save_metrics replaced a symlink, a FIFO (or
    /dev/null) with a new regular file, and a 0600 file came back 0644."""
    import os
    import stat
    import threading

    alloc = memscope.Allocator("sim:8GiB", config="")
    alloc.start_recording()
    alloc.free(alloc.alloc(MiB))
    real = tmp_path / "real.pickle"
    real.write_bytes(b"old")
    real.chmod(0o600)
    link = tmp_path / "link.pickle"
    link.symlink_to(real)
    alloc.dump_snapshot(link)
    assert link.is_symlink() and stat.S_IMODE(real.stat().st_mode) == 0o600
    assert memscope.load_trace(real).replay(capacity="1GiB").peak_live == MiB

    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    got: list[bytes] = []
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # never blocks the test, even on regression

    def drain() -> None:
        import select
        if select.select([fd], [], [], 10)[0]:
            os.set_blocking(fd, True)
            with os.fdopen(fd, "rb") as f:
                got.append(f.read())

    reader = threading.Thread(target=drain)
    reader.start()
    memscope.load_trace(real).save(fifo)
    reader.join()
    assert stat.S_ISFIFO(fifo.stat().st_mode) and json.loads(got[0])["segments"] is not None

    memscope.save_metrics("eval", {"eval_loss": 1.0}, tmp_path, combined=False)
    results = tmp_path / "eval_results.json"
    results.chmod(0o600)
    memscope.save_metrics("eval", {"eval_loss": 2.0}, tmp_path, combined=False)
    assert stat.S_IMODE(results.stat().st_mode) == 0o600
    assert json.loads(results.read_text()) == {"eval_loss": 2.0}
