"""Tracker: Trainer-named stage metrics, exact on the simulated allocator and within the
tracker's tolerances for host memory."""

from __future__ import annotations

import gc
import json
import sys

import numpy as np
import pytest

import memscope
from memscope._memscope import CascadeSource

from conftest import MiB


def gpu(metrics: dict, stage: str, what: str) -> int:
    return metrics[f"{stage}_mem_gpu_{what}"]


def cpu(metrics: dict, stage: str, what: str) -> int:
    return metrics[f"{stage}_mem_cpu_{what}"]


def test_nested_stages_exact_on_simulated_allocator(sim_spec: str) -> None:
    t = memscope.Tracker(allocators=[sim_spec])
    base = memscope.alloc(10 * MiB, sim_spec)  # before the first stage: init
    with t.stage("train"):
        keep = memscope.alloc(100 * MiB, sim_spec)
        spike = memscope.alloc(300 * MiB, sim_spec)  # a transient spike inside train
        memscope.free(spike)
        with t.stage("eval"):  # eval inside train: both exact
            e = memscope.alloc(50 * MiB, sim_spec)
            memscope.free(e)
            memscope.reset_peak_memory_stats(sim_spec)  # disturbs no stage
            kept_by_eval = memscope.alloc(20 * MiB, sim_spec)
    m = t.metrics
    assert gpu(m, "init", "alloc_delta") == 10 * MiB and gpu(m, "init", "peaked_delta") == 0
    assert m["before_init_mem_gpu"] == 0
    assert gpu(m, "train", "alloc_delta") == 120 * MiB
    assert gpu(m, "train", "peaked_delta") == 400 * MiB - 120 * MiB
    assert gpu(m, "eval", "alloc_delta") == 20 * MiB
    assert gpu(m, "eval", "peaked_delta") == 160 * MiB - 130 * MiB
    assert t.notes["gpu"].endswith(", peak-scope")
    assert isinstance(m["train_runtime"], float)
    for p in (base, keep, kept_by_eval):
        memscope.free(p, sim_spec)


def test_overlapping_stages_closed_out_of_order(sim: memscope.Allocator) -> None:
    t = memscope.Tracker(allocators=[sim], implicit_init=False)
    t.start("a")
    p = sim.alloc(64 * MiB)
    t.start("b")
    q = sim.alloc(32 * MiB)
    t.stop("a")  # a closes first; b keeps counting
    sim.free(p)
    r = sim.alloc(8 * MiB)
    sim.free(r)
    t.stop("b")
    m = t.metrics
    assert gpu(m, "a", "alloc_delta") == 96 * MiB and gpu(m, "a", "peaked_delta") == 0
    assert gpu(m, "b", "alloc_delta") == 32 * MiB - 64 * MiB
    assert gpu(m, "b", "peaked_delta") == 96 * MiB - (-32 * MiB) - 64 * MiB
    assert "init_mem_gpu_alloc_delta" not in m
    sim.free(q)


def test_cpu_deltas_within_tolerance() -> None:
    t = memscope.Tracker(allocators=[])  # host RSS only
    with t.stage("train"):
        kept = np.ones(256 * MiB, dtype=np.uint8)
        with t.stage("eval"):
            transient = np.ones(512 * MiB, dtype=np.uint8)
            del transient
    m = t.metrics
    assert abs(cpu(m, "train", "alloc_delta") - 256 * MiB) <= 4 * MiB
    assert abs(cpu(m, "train", "peaked_delta") - 512 * MiB) <= 8 * MiB
    assert abs(cpu(m, "eval", "alloc_delta")) <= 4 * MiB
    assert abs(cpu(m, "eval", "peaked_delta") - 512 * MiB) <= 8 * MiB
    assert memscope.host.mode() in t.notes["cpu"]
    assert "train_mem_gpu_alloc_delta" not in m
    del kept


def test_sampling_fallback_within_tolerance_and_reported() -> None:
    t = memscope.Tracker([memscope.host_source(force_sampling=True, sampling_interval=0.001)])
    with t.stage("train"):
        transient = np.ones(256 * MiB, dtype=np.uint8)
        import time

        time.sleep(0.01)  # a peak must last a sampling interval or two to be seen
        del transient
    m = t.metrics
    assert "sampling 1ms" in t.notes["cpu"]
    assert abs(cpu(m, "train", "peaked_delta") - 256 * MiB) <= 16 * MiB


def test_track_context_and_decorator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memscope._tracking, "_default", memscope.Tracker(allocators=["sim:3GiB"]))

    @memscope.track("eval")
    def evaluate() -> None:
        p = memscope.alloc(7 * MiB, "sim:3GiB")
        memscope.free(p, "sim:3GiB")

    with memscope.track("train"):
        evaluate()
    m = memscope.default_tracker().metrics
    assert gpu(m, "eval", "peaked_delta") == 7 * MiB
    assert gpu(m, "train", "peaked_delta") == 7 * MiB


def test_misuse_raises_usage_error(sim: memscope.Allocator) -> None:
    t = memscope.Tracker(allocators=[sim])
    with pytest.raises(memscope.UsageError, match="never started"):
        t.stop("train")
    with pytest.raises(memscope.UsageError):
        t.start("bad_name")  # '_' would make metric names ambiguous
    t.start("train")
    with pytest.raises(memscope.UsageError, match="already running"):
        t.start("train")
    assert t.running_stages() == ["train"]
    t.stop("train")
    with pytest.raises(memscope.UsageError, match="already stopped"):
        t.stop("train")


def test_skip_switch_makes_the_tracker_free(monkeypatch: pytest.MonkeyPatch) -> None:
    t = memscope.Tracker(skip_memory_metrics=True)
    with t.stage("train"):
        pass
    assert not t.enabled and t.metrics == {}
    monkeypatch.setenv("MEMSCOPE_SKIP_MEMORY_METRICS", "1")
    assert not memscope.Tracker().enabled
    monkeypatch.setenv("MEMSCOPE_SKIP_MEMORY_METRICS", "maybe")  # C++'s parser decides
    with pytest.raises(memscope.ConfigError,
                       match=r"MEMSCOPE_SKIP_MEMORY_METRICS='maybe'.*1, true, yes or on") as e:
        memscope.Tracker([memscope.host_source()])
    assert isinstance(e.value, ValueError)
    assert (e.value.key, e.value.value) == ("MEMSCOPE_SKIP_MEMORY_METRICS", "maybe")


def test_sources_and_unavailable_gpu(sim: memscope.Allocator) -> None:
    t = memscope.Tracker()
    kinds = {s["kind"]: s for s in t.sources()}
    assert kinds["cpu"]["available"] and kinds["cpu"]["label"] == "cpu"
    if not memscope.cuda_is_available():
        assert not kinds["gpu"]["available"]
        assert kinds["gpu"]["mode"].startswith("unavailable: ")
        with t.stage("train"):
            pass
        m = t.metrics
        assert "train_mem_gpu_alloc_delta" not in m
        assert "unavailable: " in t.notes["gpu"]
    assert "cpu:" in t.describe_sources()
    two = memscope.Tracker(allocators=[sim, "sim:2GiB"])
    assert [s["label"] for s in two.sources()] == ["cpu", "gpu0", "gpu1"]


def test_metrics_are_numbers_and_log_metrics_prints_the_notes_once(
        sim: memscope.Allocator, capsys: pytest.CaptureFixture[str]) -> None:
    """The README's Tracker() without a GPU: no text in the metrics (dashboards plot numbers),
    the unavailable GPU's long reason printed once under the table, numbers not padded to it."""
    reason = "the CUDA driver library could not be loaded " * 5
    t = memscope.Tracker([memscope.allocator_source(sim),
                          memscope.unavailable_source("gpu", "cuda", reason)])
    for stage in ("train", "eval", "test"):
        with t.stage(stage):
            pass
    m = t.metrics
    assert m and all(isinstance(v, (int, float)) for v in m.values()), m
    t.log_metrics("all")
    out = capsys.readouterr().out
    assert out.count(reason.strip()) == 1, out
    assert "notes:" in out
    table = out.split("notes:")[0]
    assert max(len(line) for line in table.splitlines()) < 80, table
    json.dumps(m)  # save_metrics' JSON: numbers only
    with_modes = memscope.Tracker([memscope.allocator_source(sim)], report_modes=True)
    with with_modes.stage("train"):
        pass
    assert with_modes.metrics["train_mem_gpu_mode"] == "peak-scope"


def test_update_metrics_like_the_trainer(sim: memscope.Allocator) -> None:
    t = memscope.Tracker(allocators=[sim])
    with t.stage("train"):
        p = sim.alloc(MiB)
    out = {"train_loss": 0.5}
    t.update_metrics("train", out)
    assert out["train_loss"] == 0.5 and out["train_mem_gpu_alloc_delta"] == MiB
    assert "init_mem_gpu_alloc_delta" in out
    again: dict = {}
    t.update_metrics("train", again)
    assert "init_mem_gpu_alloc_delta" not in again  # init is reported once
    sim.free(p)


def test_python_source_with_cascade_peaks() -> None:
    class Counter:
        value = 0
        peak = 0

        def set(self, v: int) -> None:
            self.value = v
            self.peak = max(self.peak, v)

        def reset(self) -> None:
            self.peak = self.value

    c = Counter()
    src = CascadeSource(name="fake", kind="gpu", mode="fake counter", current=lambda: c.value,
                        peak=lambda: c.peak, reset_peak=c.reset)
    t = memscope.Tracker([src], implicit_init=False)
    t.start("outer")
    c.set(100)
    c.set(10)
    t.start("inner")  # resets the counter: outer's 100 must survive
    c.set(50)
    c.set(20)
    t.start("late")
    c.set(30)
    t.stop("inner")  # out of order
    c.set(70)
    c.set(0)
    t.stop("late")
    t.stop("outer")
    m = t.metrics
    assert m["outer_mem_gpu_peaked_delta"] == 100 and m["outer_mem_gpu_alloc_delta"] == 0
    assert m["inner_mem_gpu_peaked_delta"] == 50 - 30 and m["inner_mem_gpu_alloc_delta"] == 20
    assert m["late_mem_gpu_peaked_delta"] == 70 and m["late_mem_gpu_alloc_delta"] == -20
    assert t.notes == {"gpu": "fake, fake counter"}


def test_cascade_source_subclass_and_callback_errors() -> None:
    """As memscope.torch.TorchCudaSource does: a Python subclass of the bound CascadeSource. A
    callback that fails while a window opens fails start(); one that fails while it closes is
    reported as unraisable and the window still closes, so the stack stays consistent."""
    state = {"value": 5, "peak": 5, "fail_peak": False}

    def peak() -> int:
        if state["fail_peak"]:
            raise RuntimeError("counter gone")
        return state["peak"]

    class Fake(CascadeSource):
        def __init__(self) -> None:
            super().__init__(name="fake", kind="gpu", mode="fake", current=lambda: state["value"],
                             peak=peak, reset_peak=lambda: state.update(peak=state["value"]))

    src = Fake()
    assert isinstance(src, memscope.MemorySource) and src.current() == 5 and src.name == "fake"
    t = memscope.Tracker([src], implicit_init=False)
    t.start("a")
    state.update(value=50, peak=50)
    state["fail_peak"] = True
    with pytest.raises(RuntimeError, match="counter gone"):
        t.start("b")  # opening b folds a's peak first: the counter fails
    unraisable: list[BaseException | None] = []
    hook = sys.unraisablehook
    # Only the exception is kept: the hook's argument is not tracked by the garbage collector,
    # so keeping it would leak the cycle it forms with this frame.
    sys.unraisablehook = lambda args: unraisable.append(args.exc_value)
    try:
        t.stop("a")
    finally:
        sys.unraisablehook = hook
    assert len(unraisable) == 1 and "counter gone" in str(unraisable[0])
    assert t.metrics["a_mem_gpu_alloc_delta"] == 45
    state["fail_peak"] = False
    with t.stage("c"):  # the stack is usable again
        state.update(value=80, peak=80)
        state["value"] = 60
    assert t.metrics["c_mem_gpu_peaked_delta"] == 20


def test_cascade_source_in_a_reference_cycle_is_collected() -> None:
    """A CascadeSource whose callables refer back to it (a lambda whose scope holds the source)
    is freed by the garbage collector, not leaked through the C++ side."""
    freed = []

    class Marker:
        def __del__(self) -> None:
            freed.append(True)

    def make() -> None:
        scope: dict = {"marker": Marker()}
        scope["source"] = CascadeSource(name="cycle", kind="gpu", mode="m",
                                        current=lambda: len(scope), peak=lambda: len(scope),
                                        reset_peak=lambda: None)

    make()
    gc.collect()
    assert freed == [True]


def test_formatting_and_files(tmp_path, sim: memscope.Allocator, capsys) -> None:
    metrics = {"train_mem_cpu_alloc_delta": 256 * MiB, "train_runtime": 1.5,
               "train_loss": 0.25, "epoch": 1, "note": "x"}
    text = memscope.metrics_format(metrics)
    assert text["train_mem_cpu_alloc_delta"] == "256.00 MiB"
    compat = memscope.metrics_format(metrics, trainer_compat=True)
    assert compat["train_mem_cpu_alloc_delta"] == "256MB"
    memscope.log_metrics("train", metrics)
    out = capsys.readouterr().out
    assert "***** train metrics *****" in out and "256.00 MiB" in out
    (tmp_path / "all_results.json").write_text(json.dumps({"earlier": 1}))
    memscope.save_metrics("train", metrics, tmp_path)
    assert memscope.load_metrics(tmp_path / "train_results.json") == metrics
    combined = json.loads((tmp_path / "all_results.json").read_text())
    assert combined["earlier"] == 1 and combined["train_loss"] == 0.25
    t = memscope.Tracker(allocators=[sim])
    with t.stage("test"):
        pass
    t.save_metrics("test", tmp_path)
    assert "test_mem_gpu_alloc_delta" in json.loads((tmp_path / "test_results.json").read_text())


def test_one_rule_of_memory_keys_through_the_binding() -> None:
    """memscope.metric_unit is the C++ rule the tables follow, not a copy of it."""
    assert memscope.metric_unit("train_mem_cpu_alloc_delta") == "memory"
    assert memscope.metric_unit("train_memscope_cpu_alloc_delta") == "bytes"  # memscope.hf's
    assert memscope.metric_unit("train_runtime") == "seconds"
    assert memscope.metric_unit("total_flos") == "flops"
    assert memscope.metric_unit("train_loss") == "number"
    assert memscope.is_memory_key("cpu_peaked_delta") and not memscope.is_memory_key("epoch")
    metrics = {key: 3 * MiB for key in ("train_memscope_gpu_peaked_delta", "train_samples")}
    text = memscope.metrics_format(metrics)
    assert [text[k] == "3.00 MiB" for k in metrics] == [memscope.is_memory_key(k)
                                                         for k in metrics]


@pytest.mark.parametrize("value, error, says", [
    (2**63, ValueError, "metric 'x': 9223372036854775808 does not fit in a signed 64-bit integer"),
    (-(2**63) - 1, ValueError, "does not fit in a signed 64-bit integer; pass a float"),
    (None, TypeError, "metric 'x': None is a NoneType; metric values are int, float or str"),
    ([1], TypeError, "metric 'x': [1] is a list"),
])
def test_metric_values_that_are_not_metrics(tmp_path, value, error, says: str) -> None:
    """Issue 10.9: 2**63 was an untyped RuntimeError (std::bad_cast), None silently "None"."""
    for call in (lambda m: memscope.metrics_format(m),
                 lambda m: memscope.log_metrics("train", m),
                 lambda m: memscope.save_metrics("train", m, tmp_path)):
        with pytest.raises(error) as raised:
            call({"train_loss": 0.5, "x": value})
        assert says in str(raised.value)
    assert not (tmp_path / "train_results.json").exists()


def test_metric_values_keep_their_number_types(tmp_path) -> None:
    """Numbers that are not Python int/float (numpy scalars) stay numbers; the extremes of
    int64 and a float beyond it are kept exactly."""
    metrics = {"a": np.int64(5), "b": np.float32(0.5), "c": 2**63 - 1, "d": -(2**63),
               "e": float(2**63), "f": True, "g": "text"}
    memscope.save_metrics("train", metrics, tmp_path, combined=False)
    assert memscope.load_metrics(tmp_path / "train_results.json") == {
        "a": 5, "b": 0.5, "c": 2**63 - 1, "d": -(2**63), "e": float(2**63), "f": 1, "g": "text"}


class _Window:
    def __init__(self, begin: object, end: object) -> None:
        self.begin, self._end = begin, end

    def close(self) -> tuple[object, object]:
        return self._end, self._end


class _BigSource:
    """A Python source whose numbers are given: no int of more than 64 bits gets through."""
    name, kind, available, reason, mode = "big", "gpu", True, "", "given"

    def __init__(self, begin: object, end: object) -> None:
        self._begin, self._end = begin, end

    def current(self) -> object:
        return self._begin

    def open_window(self) -> _Window:
        return _Window(self._begin, self._end)


def test_python_source_numbers_that_are_not_byte_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 10.9: 2**63 from a Python source was an untyped std::bad_cast."""
    t = memscope.Tracker([_BigSource(2**63, 0)], implicit_init=False)
    with pytest.raises(ValueError, match=r"memory source 'big': open_window\(\).begin gave "
                                         r"9223372036854775808, which does not fit"):
        t.start("a")
    with pytest.raises(TypeError, match=r"memory source 'big': open_window\(\).begin must be an "
                                        r"int \(bytes\), not float"):
        memscope.Tracker([_BigSource(1.5, 0)], implicit_init=False).start("a")
    unraisable: list[BaseException | None] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda args: unraisable.append(args.exc_value))
    t = memscope.Tracker([_BigSource(0, 2**63)], implicit_init=False)
    t.start("a")
    t.stop("a")  # a window's close() never raises: reported, and the stage still ends
    assert [type(e) for e in unraisable] == [ValueError]
    assert "memory source 'big': close()[0] (current) gave 9223372036854775808" in str(unraisable[0])
    assert t.metrics["a_mem_gpu_alloc_delta"] == 0
