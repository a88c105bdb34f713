"""Allocator recording from Python: start/stop, the dumped snapshot PyTorch's viewer reads,
Python frames naming the calling function and file, tags from Tracker stages, and the cost of
recording without stacks."""

from __future__ import annotations

import pickle
import threading
from pathlib import Path
from typing import Any

import pytest

import memscope

MiB = 1 << 20


def _dump(allocator: memscope.Allocator, tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "snap.pickle"
    allocator.dump_snapshot(path)
    with open(path, "rb") as f:
        return pickle.load(f)


def _events(snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    return snapshot["device_traces"][0]


def test_start_stop_and_the_events(tmp_path: Path) -> None:
    a = memscope.Allocator("sim:8GiB", config="")
    assert not a.recording
    a.start_recording()
    assert a.recording
    p = a.alloc(1000)
    a.free(p)
    a.stop_recording()
    assert not a.recording
    a.free(a.alloc(2000))  # not recorded
    events = _events(_dump(a, tmp_path))
    assert [e["action"] for e in events] == [
        "segment_alloc", "alloc", "free_requested", "free_completed"]
    assert events[1]["addr"] == p and events[1]["size"] == 1000
    assert events[0]["size"] == 2 * MiB
    assert all(e["frames"] == [] for e in events)


def test_recorded_snapshot_is_a_trace() -> None:
    a = memscope.Allocator("sim:8GiB", config="record_history:4")
    for _ in range(3):
        a.free(a.alloc(4096))
    keep = a.alloc(2 << 20)  # large pool: a segment of its own
    trace = a.recorded_snapshot()
    assert isinstance(trace, memscope.Trace)
    assert trace.events == [4]
    # of a segment_alloc, 3 x (alloc, free_requested, free_completed), segment_alloc, alloc
    assert trace.dropped_events == 1 + 3 * 3 + 2 - 4
    assert trace.segments == 2
    assert trace.settings == "record_history:4"
    a.free(keep)


def test_arguments_are_checked() -> None:
    a = memscope.Allocator("sim:1GiB", config="")
    with pytest.raises(ValueError, match="stacks"):
        a.start_recording(stacks="java")
    with pytest.raises(memscope.UsageError, match="max_entries"):
        a.start_recording(max_entries=0)
    assert not a.recording


def _allocate_here(a: memscope.Allocator) -> int:
    return a.alloc(4096)


def test_python_frames_name_the_function_and_file(tmp_path: Path) -> None:
    a = memscope.Allocator("sim:8GiB", config="")
    a.start_recording(stacks="python")
    p = _allocate_here(a)
    buf = a.buffer(8192)  # allocates with the GIL released too
    snap = _dump(a, tmp_path)
    allocs = [e for e in _events(snap) if e["action"] == "alloc"]
    assert len(allocs) == 2
    frames = allocs[0]["frames"]
    assert frames[0]["name"] == "_allocate_here"
    assert frames[0]["filename"] == __file__
    assert frames[0]["line"] > 0
    assert frames[1]["name"] == "test_python_frames_name_the_function_and_file"
    assert allocs[1]["frames"][0]["name"] == "test_python_frames_name_the_function_and_file"
    # The live block carries its stack in the segment list too.
    live = [b for s in snap["segments"] for b in s["blocks"] if b["address"] == p]
    assert live and live[0]["frames"] and live[0]["frames"][0]["name"] == "_allocate_here"
    buf.free()
    a.free(p)


def test_all_stacks_put_cpp_frames_inside_python_ones(tmp_path: Path) -> None:
    a = memscope.Allocator("sim:8GiB", config="")
    a.start_recording(stacks="all")
    a.free(_allocate_here(a))
    alloc = next(e for e in _events(_dump(a, tmp_path)) if e["action"] == "alloc")
    names = [f["name"] for f in alloc["frames"]]
    assert "_allocate_here" in names
    first_python = names.index("_allocate_here")
    assert first_python > 0  # C++ frames (the extension, the interpreter) come first


def test_each_python_thread_records_its_own_frames(tmp_path: Path) -> None:
    # Threads started from Python are Python threads: their own frames, not the main thread's.
    a = memscope.Allocator("sim:8GiB", config="")
    a.start_recording(stacks="python")

    def worker() -> None:
        a.free(_allocate_here(a))

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    alloc = next(e for e in _events(_dump(a, tmp_path)) if e["action"] == "alloc")
    names = [f["name"] for f in alloc["frames"]]
    assert names[:2] == ["_allocate_here", "test_each_python_thread_records_its_own_frames"
                         ".<locals>.worker"]


def test_tags_come_from_tracker_stages(tmp_path: Path) -> None:
    a = memscope.Allocator("sim:8GiB", config="")
    tracker = memscope.Tracker(allocators=[a], implicit_init=False)
    a.start_recording()
    with tracker.stage("train"):
        a.free(a.alloc(100))
        with tracker.stage("eval"):
            a.free(a.alloc(200))
        a.free(a.alloc(300))
    a.free(a.alloc(400))
    allocs = [e for e in _events(_dump(a, tmp_path)) if e["action"] == "alloc"]
    assert [(e["size"], e.get("user_metadata", "")) for e in allocs] == [
        (100, "train"), (200, "eval"), (300, "train"), (400, "")]


def test_config_records_from_construction(tmp_path: Path) -> None:
    a = memscope.Allocator("sim:8GiB", config="record_history:3")
    assert a.recording
    for _ in range(3):
        a.free(a.alloc(4096))
    snap = _dump(a, tmp_path)
    # The newest three of 1 segment_alloc + 3 x (alloc, free_requested, free_completed).
    assert [e["action"] for e in _events(snap)] == ["alloc", "free_requested", "free_completed"]


def test_stacks_are_walked_only_when_asked(tmp_path: Path) -> None:
    # What recording costs is measured in bench/ (bench/recording_python.py, docs/benchmarks.md),
    # never in a timed test; here: without stacks no frame is walked, with them every alloc has one.
    a = memscope.Allocator("sim:8GiB", config="")
    a.start_recording(max_entries=1000)
    a.free(a.alloc(4096))
    assert all(not e["frames"] for e in _events(_dump(a, tmp_path)))
    a.start_recording(max_entries=1000, stacks="python")
    a.free(a.alloc(4096))
    allocs = [e for e in _events(_dump(a, tmp_path)) if e["action"] == "alloc"]
    assert allocs and all(e["frames"] for e in allocs)
    a.stop_recording()
