"""An out-of-memory error explained from its recording: memscope's allocator on a simulated
device is the runtime (a real OOM at a real capacity, recorded as it happened), the trace is
saved in PyTorch's snapshot format, read back, and explained; every counterfactual it claims is
checked by running the same program again with that setting. Costs about 1 s."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

import memscope

MiB = 1 << 20
CAPACITY = 1024 * MiB


def fragment(a: memscope.Allocator) -> list[int]:
    """Fills the device with 20 MiB segments of four 5 MiB blocks each and keeps one block of
    every segment: 255 MiB live, 1020 MiB reserved, no segment releasable."""
    blocks = []
    try:
        while True:
            blocks.append(a.alloc(5 * MiB))
    except memscope.OutOfMemoryError:
        pass  # the device is full: the first OOM
    kept = blocks[::4]
    for p in blocks:
        if p not in kept:
            a.free(p)
    return kept


def ask_big(a: memscope.Allocator) -> memscope.OutOfMemoryError | None:
    try:
        a.free(a.alloc(100 * MiB))
    except memscope.OutOfMemoryError as e:
        return e
    return None


def run_job(config: str) -> tuple[memscope.Allocator, memscope.OutOfMemoryError | None]:
    a = memscope.Allocator(f"sim:{CAPACITY}B", config=config)
    a.start_recording(stacks="python")
    fragment(a)
    return a, ask_big(a)


def test_a_real_oom_explained_and_its_counterfactual_checked(tmp_path: Path) -> None:
    a, error = run_job("")
    assert error is not None
    trace = a.recorded_snapshot()
    assert len(trace.ooms()) == 2  # filling the device, then the 100 MiB request
    x = trace.explain_oom(which=1)
    assert x.oom_count == 2 and x.request == 100 * MiB
    # The figures are the allocator's at the moment it refused.
    assert x.reserved == error.reserved == a.memory_reserved()
    assert x.device_free == error.device_free == CAPACITY - x.reserved
    assert x.capacity == CAPACITY
    assert x.live_requested == a.memory_allocated() == 51 * 5 * MiB
    assert x.cached_free == x.reserved - x.allocated and x.largest_free_block == 15 * MiB
    assert x.live.top_sites[0].where.startswith("test_oom_explain.py:")
    assert "fragment" in x.live.top_sites[0].where
    assert x.segments_at_oom
    assert x.reproduced
    by_label = {c.label: c.fits for c in x.counterfactuals}
    assert by_label["expandable_segments:True"] is True
    assert by_label["garbage_collection_threshold:0.8"] is False  # no segment is free whole
    assert x.shrink_by > 0 and x.fits_on == x.capacity + x.shrink_by
    # Each claim checked by running the job again with that setting.
    for c in x.counterfactuals[1:]:
        _, again = run_job(c.config)
        assert (again is None) == c.fits, c.label
    text = x.explain()
    assert "would have fitted with expandable_segments:True" in text
    assert "fragment" in text
    assert memscope.Report.from_json(x.to_report().to_json()).to_text() == text


def test_the_snapshot_reads_in_pytorch_and_back(tmp_path: Path) -> None:
    viz = pytest.importorskip("torch.cuda._memory_viz")
    a, _ = run_job("")
    path = tmp_path / "oom-rank0-pid1.pickle"
    a.dump_snapshot(path)
    with open(path, "rb") as f:
        data = pickle.load(f)
    ooms = [e for e in data["device_traces"][0] if e["action"] == "oom"]
    assert [e["size"] for e in ooms][-1] == 100 * MiB and "device_free" in ooms[-1]
    text = viz.trace(data)  # PyTorch's own reader of the format
    assert "raise OutOfMemoryError # 100.0MiB requested" in text
    back = memscope.load_trace(path).explain_oom(which=1)
    assert back.request == 100 * MiB and back.reserved == a.memory_reserved()


def _edited(tmp_path: Path, edit: Any, name: str) -> Path:
    a, _ = run_job("")
    path = tmp_path / "snap.pickle"
    a.dump_snapshot(path)
    data = pickle.loads(path.read_bytes())
    oom = [e for e in data["device_traces"][0] if e["action"] == "oom"][-1]
    edit(oom)
    out = tmp_path / name
    out.write_bytes(pickle.dumps(data, protocol=4))
    return out


def test_a_damaged_oom_record_is_a_typed_error_naming_it(tmp_path: Path) -> None:
    zero = _edited(tmp_path, lambda e: e.update(size=0), "damaged.pickle")
    with pytest.raises(memscope.TraceFormatError,
                       match=r"damaged\.pickle: device_traces\[0\]\[\d+\] \(the out-of-memory "
                             r"record\): the request is 0 bytes"):
        memscope.load_trace(zero).explain_oom(which=1, source=str(zero))
    huge = _edited(tmp_path, lambda e: e.update(device_free=1 << 60), "huge.pickle")
    with pytest.raises(memscope.TraceFormatError, match="more than any device holds"):
        memscope.load_trace(huge).explain_oom(which=1, source=str(huge))
    text = _edited(tmp_path, lambda e: e.update(device_free="lots"), "text.pickle")
    with pytest.raises(memscope.TraceFormatError, match=r"device_free: expected int"):
        memscope.load_trace(text)
    with pytest.raises(memscope.TraceFormatError, match="has 2 out-of-memory events"):
        memscope.load_trace(zero).explain_oom(which=2)


def test_a_trace_without_an_oom_says_so() -> None:
    a = memscope.Allocator("sim:1GiB", config="")
    a.start_recording()
    a.free(a.alloc(MiB))
    with pytest.raises(memscope.TraceFormatError, match="has 0 out-of-memory events"):
        a.recorded_snapshot().explain_oom()


def test_an_oom_the_window_cannot_explain_is_not_claimed() -> None:
    # Recording starts after the device was filled: the ring holds only the refused request,
    # and the live set it implies fits, so the replay must not claim a counterfactual.
    a = memscope.Allocator(f"sim:{CAPACITY}B", config="")
    fragment(a)
    a.start_recording(max_entries=1)
    assert ask_big(a) is not None
    x = a.recorded_snapshot().explain_oom()
    assert not x.reproduced
    assert "not reproduced" in x.explain() and x.shrink_by == 0
