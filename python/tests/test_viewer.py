"""Snapshots memscope writes open in PyTorch's memory viewer.

A CachingAllocator on the host backend and on a simulated device records a seeded workload
(allocations of small and large sizes, frees, empty_cache(), an out-of-memory error on the
simulated device) and writes a snapshot. Then:

- Python's pickle loads it, and torch.cuda._memory_viz's own functions run on it: the segment
  summary (segsum), the flamegraph inputs of memory() and segments() (their formatting needs a
  downloaded perl script, so a format_flamegraph that returns the lines is passed), trace(),
  and the HTML of trace_plot() and segment_plot();
- the placement check of the HTML viewer (memviz_check.py: every block of every step lies in a
  segment) passes, and fails on deliberately broken snapshots;
- the HTML pages load in headless Chromium without an error, with the viewer's module (on a CDN
  this machine cannot reach, and not in the wheel) replaced by our stub, which unpickles the
  embedded payload with only the opcodes the viewer reads (tests/viewer/memoryviz_stub.js).

Skips, with the reason, when torch or Chromium is missing or memscope cannot record.
"""

from __future__ import annotations

import base64
import copy
import json
import pickle
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from browser import chromium, chromium_missing_reason, load_page
from conftest import MiB
from memviz_check import check_placement

import memscope

ROOT = Path(__file__).resolve().parents[2]
STUB = ROOT / "tests" / "viewer" / "memoryviz_stub.js"


def _viz() -> Any:
    try:
        from torch.cuda import _memory_viz
    except Exception as e:  # torch missing, or a torch whose import fails here
        pytest.skip(f"torch is not importable: {e}")
    return _memory_viz


def _workload(allocator: memscope.Allocator, seed: int) -> None:
    rng = random.Random(seed)
    live: list[int] = []
    for step in range(1500):
        if not live or rng.random() < 0.6:
            size = rng.randint(1, 200_000) if rng.random() < 0.7 else rng.randint(1, 48 * MiB)
            try:
                live.append(allocator.alloc(size))
            except memscope.OutOfMemoryError:
                pass
        else:
            allocator.free(live.pop(rng.randrange(len(live))))
        if step % 400 == 399:
            allocator.empty_cache()
    if allocator.kind == "simulated":
        with pytest.raises(memscope.OutOfMemoryError):
            allocator.alloc(allocator.capacity + 1)
    for address in live[::2]:  # half stay live at the snapshot
        allocator.free(address)


def _record(spec: str, folder: Path, seed: int) -> dict[str, Path]:
    allocator = memscope.Allocator(spec, config="")
    if not hasattr(allocator, "start_recording") or not hasattr(allocator, "dump_snapshot"):
        pytest.skip("memscope.Allocator.start_recording()/dump_snapshot() are not bound yet")
    before = [allocator.alloc(4096), allocator.alloc(3 * MiB)]  # live before the recording
    # Python and C++ frames on the host, Python frames on the simulated device.
    allocator.start_recording(stacks="all" if spec == "host" else "python")
    _workload(allocator, seed)
    allocator.free(before[0])
    allocator.stop_recording()
    paths = {kind: folder / f"{spec.replace(':', '_')}.{kind}" for kind in ("pickle", "json")}
    for path in paths.values():
        allocator.dump_snapshot(str(path))
    return paths


@pytest.fixture(scope="module", params=["host", "sim:2GiB"])
def recording(request: pytest.FixtureRequest,
              tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The pickle and the JSON memscope wrote for a recorded workload, per backend."""
    return _record(request.param, tmp_path_factory.mktemp("viewer"), seed=5)


@pytest.fixture(scope="module")
def recorded(recording: dict[str, Path]) -> bytes:
    return recording["pickle"].read_bytes()


def _lines(text: str) -> str:
    return text  # in place of the flamegraph formatting (a perl script _memory_viz downloads)


def _flame_total(lines: str) -> int:
    return sum(int(line.rsplit(" ", 1)[1]) for line in lines.splitlines() if line)


# ---- The Python side of PyTorch's viewer -------------------------------------------------


def test_pickle_loads_it_and_it_has_torchs_shape(recorded: bytes) -> None:
    assert recorded[:2] == b"\x80\x04"  # protocol 4, as torch.cuda.memory._dump_snapshot
    data = pickle.loads(recorded)
    assert pickle.dumps(data, protocol=4) == recorded  # the very bytes Python writes
    assert set(data) >= {"segments", "device_traces"}
    seg = data["segments"][0]
    assert list(seg) == ["device", "address", "total_size", "allocated_size", "active_size",
                         "requested_size", "stream", "segment_type", "segment_pool_id",
                         "is_expandable", "frames", "blocks"]
    assert list(seg["blocks"][0]) == ["address", "size", "requested_size", "state", "frames"]
    actions = {e["action"] for trace in data["device_traces"] for e in trace}
    assert {"alloc", "free_requested", "free_completed", "segment_alloc"} <= actions
    for trace in data["device_traces"]:
        for e in trace:
            assert ("device_free" in e) == (e["action"] == "oom")
            assert ("addr" in e) != (e["action"] == "oom")


def test_json_is_the_same_snapshot(recording: dict[str, Path]) -> None:
    data = json.loads(json.dumps(pickle.loads(recording["pickle"].read_bytes())))  # no tuples
    from_json = json.loads(recording["json"].read_text(encoding="utf-8"))
    # Each dump converts the recorder's clock to microseconds afresh, so one dump's times may
    # differ from another's by 1 (the rounding); everything else is the same.
    for ours, theirs in zip(data["device_traces"], from_json["device_traces"], strict=True):
        for a, b in zip(ours, theirs, strict=True):
            assert abs(a.pop("time_us") - b.pop("time_us")) <= 1
    assert from_json == data


def test_memscope_reads_back_what_it_wrote(recording: dict[str, Path]) -> None:
    data = pickle.loads(recording["pickle"].read_bytes())
    for path in recording.values():
        trace = memscope.load_trace(str(path))
        assert trace.segments == len(data["segments"])
        assert trace.events == [len(t) for t in data["device_traces"]]


def test_segsum_memory_and_segments_summaries(recorded: bytes) -> None:
    viz = _viz()
    data = pickle.loads(recorded)
    reserved = sum(s["total_size"] for s in data["segments"])
    summary = viz.segsum(data)  # asserts its own byte accounting on the way
    assert f"segments: {len(data['segments'])}\n" in summary
    assert f"total_reserved: {viz.Bytes(reserved)}\n" in summary
    # Every byte of every segment appears once in each flamegraph input.
    assert _flame_total(viz.memory(data, format_flamegraph=_lines)) == reserved
    assert _flame_total(viz.segments(data, format_flamegraph=_lines)) == reserved
    assert "<gaps>" in viz.memory(data, format_flamegraph=_lines)  # rounding is visible


def test_trace_text_names_every_event(recorded: bytes) -> None:
    viz = _viz()
    data = pickle.loads(recorded)
    text = viz.trace(data)
    events = data["device_traces"][0]
    assert f"{len(events)} entries" in text

    def count(action: str) -> int:
        return sum(e["action"] == action for e in events)

    assert text.count("= cudaMalloc(") == count("segment_alloc")
    assert text.count("raise OutOfMemoryError") == count("oom")
    # memscope's own action is printed as the event itself, not mistaken for another.
    assert text.count("'action': 'empty_cache'") == count("empty_cache") > 0


@pytest.mark.parametrize("plot", ["trace_plot", "segment_plot"])
def test_html_plots_embed_the_snapshot(recorded: bytes, plot: str,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    viz = _viz()
    data = pickle.loads(recorded)
    page = getattr(viz, plot)(copy.deepcopy(data))
    embedded = re.search(r"const local_files = (\[.*?\])\n", page)
    assert embedded, "the page's layout changed"
    payload = json.loads(embedded.group(1))
    assert pickle.loads(base64.b64decode(payload[0]["base64"])) == data
    if plot == "trace_plot":  # pairs every free_requested with its free_completed, or prints
        viz.trace_plot(copy.deepcopy(data), filter_freed=True)
        assert "without free_requested" not in capsys.readouterr().out


# ---- The HTML viewer's placement rule ----------------------------------------------------


def test_our_snapshots_pass_the_viewers_placement_check(recorded: bytes) -> None:
    assert check_placement(pickle.loads(recorded)) == []


def test_a_real_pytorch_snapshot_passes_the_placement_check(real_trace: Path) -> None:
    """The check itself: PyTorch's own snapshot (the corpus's small train step) must pass."""
    assert check_placement(pickle.loads(real_trace.read_bytes())) == []


def _breakages() -> dict[str, Callable[[dict[str, Any]], None]]:
    def first(data: dict[str, Any], action: str) -> int:
        return next(i for i, e in enumerate(data["device_traces"][0]) if e["action"] == action)

    def drop_segment_free(data: dict[str, Any]) -> None:
        del data["device_traces"][0][first(data, "segment_free")]

    def move_an_alloc(data: dict[str, Any]) -> None:
        data["device_traces"][0][first(data, "alloc")]["addr"] += 1 << 44

    def free_a_stranger(data: dict[str, Any]) -> None:
        data["device_traces"][0][first(data, "free_requested")]["addr"] = 12345

    def drop_a_segment(data: dict[str, Any]) -> None:
        # One that an event of the trace allocates or frees a block in.
        used = [e["addr"] for e in data["device_traces"][0] if e["action"] == "alloc"]
        seg = next(s for s in data["segments"]
                   if any(s["address"] <= a < s["address"] + s["total_size"] for a in used))
        data["segments"].remove(seg)

    def shift_a_block(data: dict[str, Any]) -> None:
        seg = next(s for s in data["segments"] if len(s["blocks"]) > 1)
        seg["blocks"][1]["address"] += 512

    return {f.__name__: f for f in (drop_segment_free, move_an_alloc, free_a_stranger,
                                     drop_a_segment, shift_a_block)}


@pytest.mark.parametrize("breakage", list(_breakages()))
def test_broken_snapshots_fail_the_placement_check(breakage: str, real_trace: Path) -> None:
    data = pickle.loads(real_trace.read_bytes())
    if breakage == "drop_segment_free":
        pytest.skip("PyTorch's sample trace frees no segment")
    _breakages()[breakage](data)
    assert check_placement(data) != []


@pytest.mark.parametrize("breakage", list(_breakages()))
def test_broken_recordings_fail_the_placement_check(recorded: bytes, breakage: str) -> None:
    data = pickle.loads(recorded)
    if breakage == "drop_segment_free" and not any(
            e["action"] == "segment_free" for e in data["device_traces"][0]):
        pytest.skip("this recording frees no segment")
    _breakages()[breakage](data)
    assert check_placement(data) != []


# ---- Headless Chromium -------------------------------------------------------------------

needs_chromium = pytest.mark.skipif(chromium() is None, reason=chromium_missing_reason())

_IMPORT = re.compile(r'import \{add_local_files\} from "([^"]+)"')


def _with_stub(page: str) -> str:
    url = _IMPORT.search(page)
    assert url, "the viewer's import line changed: update _IMPORT"
    return page.replace(url.group(1), "./memoryviz_stub.js")


def _page_for(raw: bytes, view: str) -> str:
    """PyTorch's viewer page around our own bytes (trace_plot re-pickles with Python's)."""
    viz = _viz()
    padded = raw + b"\0" * (3 - len(raw) % 3)  # as _memory_viz pads before base64
    files = json.dumps([{"name": "snapshot.pickle", "base64": base64.b64encode(padded).decode()}])
    template: str = viz._memory_viz_template
    return template.replace("$VIZ_KIND", repr(view)).replace("$SNAPSHOT", files)


def _stub_result(dom: str) -> str:
    m = re.search(r'<pre id="memscope-stub-result">(.*?)</pre>', dom, re.DOTALL)
    assert m, "the stub did not run"
    return m.group(1)


def _screenshot_dir() -> Path | None:
    """<build>/viewer-screenshots when memscope runs from a build tree, else None."""
    build = Path(memscope.__file__).resolve().parents[2]
    return build / "viewer-screenshots" if (build / "CMakeCache.txt").exists() else None


@needs_chromium
@pytest.mark.parametrize("plot", ["trace_plot", "segment_plot"])
def test_plots_load_in_chromium_without_errors(recorded: bytes, plot: str,
                                               request: pytest.FixtureRequest) -> None:
    viz = _viz()
    data = pickle.loads(recorded)
    shots = _screenshot_dir()
    name = re.sub(r"[^\w.-]", "_", request.node.name)
    page = load_page(_with_stub(getattr(viz, plot)(data)), {"memoryviz_stub.js": STUB},
                     screenshot=shots / f"{name}.png" if shots else None)
    assert page.errors == []
    events = sum(len(t) for t in data["device_traces"])
    blocks = sum(len(s["blocks"]) for s in data["segments"])
    assert _stub_result(page.dom).endswith(
        f"segments={len(data['segments'])} blocks={blocks} events={events}")


@needs_chromium
def test_our_own_bytes_load_in_chromium(recorded: bytes) -> None:
    """The bytes memscope wrote, not Python's re-pickling, through the viewer's opcodes."""
    page = load_page(_with_stub(_page_for(recorded, "Allocator State History")),
                     {"memoryviz_stub.js": STUB})
    assert page.errors == []
    assert _stub_result(page.dom).startswith("ok Allocator State History")


@needs_chromium
def test_chromium_reports_what_the_viewer_could_not_read(real_trace: Path) -> None:
    """The harness sees errors: a protocol-5 pickle (the viewer reads 2 to 4), and, offline,
    the unmodified page's module import from the CDN."""
    viz = _viz()
    data = pickle.loads(real_trace.read_bytes())
    page = load_page(_with_stub(_page_for(pickle.dumps(data, protocol=5), "x")),
                     {"memoryviz_stub.js": STUB})
    assert any("protocol 5" in e for e in page.errors), page.errors
    # Offline, the viewer's import fails and that is the only error; online it may load.
    offline = load_page(viz.segment_plot(data))
    assert all("failed to load <script>" in e for e in offline.errors), offline.errors
