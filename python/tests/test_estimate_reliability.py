"""memscope.estimate / max_batch leave the process as they found it and refuse what they cannot
estimate (issue 44): captures serialised and scoped to their thread, nested captures refused,
CUDA queries that agree with each other and with `device=`, a peak that is what the step needs
whatever the config's limit, sizes no GPU has refused, arguments checked before any capture,
steps the capture cannot see refused, sys.exit() in the workload an error, paths not UTF-8."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import memscope

torch = pytest.importorskip("torch")
# The command line, as `memscope estimate` execs it.
COMMAND = [sys.executable, "-m", "memscope._estimate_command"]
nn = torch.nn
MiB = 1 << 20
GiB = 1 << 30


def mlp(width: int = 256) -> Callable[[int], Callable[[], None]]:
    def workload(batch: int) -> Callable[[], None]:
        model = nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, 10)).cuda()
        opt = torch.optim.AdamW(model.parameters(), foreach=True)

        def step() -> None:
            model(torch.randn(batch, 64, device="cuda")).logsumexp(-1).mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        return step

    return workload


def torch_state() -> dict[str, Any]:
    """Every attribute of torch a capture replaces, and what this thread's queries answer."""
    import torch.amp.grad_scaler as grad_scaler
    import torch.cuda.amp.common as amp_common
    import torch.optim.optimizer as optimizer

    autocast = torch.amp.autocast_mode.autocast
    names = ("is_available", "device_count", "current_device", "set_device",
             "get_device_capability", "get_device_name", "get_device_properties",
             "is_bf16_supported", "synchronize", "empty_cache", "reset_peak_memory_stats",
             "reset_accumulated_memory_stats")
    state: dict[str, Any] = {f"cuda.{n}": getattr(torch.cuda, n) for n in names}
    state.update({
        "swap_tensors": torch.utils.swap_tensors,
        "autocast.__init__": autocast.__init__, "autocast.__enter__": autocast.__enter__,
        "autocast.__exit__": autocast.__exit__,
        "foreach": optimizer._default_to_fused_or_foreach,
        "set_default_device": torch.set_default_device,
        "get_default_device": torch.get_default_device,
        "GradScaler._maybe_opt_step": grad_scaler.GradScaler._maybe_opt_step,
        "amp_definitely_not_available": amp_common.amp_definitely_not_available,
        "Thread.start": threading.Thread.start,
        "answers": (torch.cuda.is_available(), torch.cuda.device_count(),
                    str(torch.get_default_device())),
    })
    return state


@pytest.fixture
def unchanged_torch() -> Iterator[None]:
    """Fails the test when torch is left changed (patched functions, the default device)."""
    before = torch_state()
    yield
    assert torch_state() == before


# ---- 1. one capture at a time, seen by its own thread only --------------------------------


def test_overlapping_captures_leave_torch_unpatched_and_other_threads_see_no_patch(
        unchanged_torch: None) -> None:
    # About 3 s: four captures of a small MLP on four threads, one observer thread.
    inside = threading.Event()
    observed = threading.Event()
    seen: list[Any] = []

    def observed_workload(batch: int) -> Callable[[], None]:
        step = mlp()(batch)
        inside.set()  # a capture runs on this thread now: the observer looks meanwhile
        assert observed.wait(30)
        return step

    def observe() -> None:
        assert inside.wait(30)
        seen.append(torch.cuda.is_available())
        seen.append(torch.cuda.device_count())
        with torch.autocast("cuda", enabled=False) as region:
            seen.append(region.device)  # "cuda" as asked, not the capture's CPU autocast
        observed.set()

    results: list[Any] = []
    errors: list[BaseException] = []

    def run(work: Callable[[int], Callable[[], None]]) -> None:
        try:
            results.append(memscope.estimate(work, batch=4, steps=2, capacity="1GiB"))
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=observe)]
    threads.append(threading.Thread(target=run, args=(observed_workload,)))
    threads += [threading.Thread(target=run, args=(mlp(),)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert seen == [False, 0, "cuda"]
    assert len(results) == 4
    assert len({r.peak_allocated for r in results}) == 1  # the same step, the same figure


def test_a_capture_inside_a_capture_is_refused_and_restores_torch(
        unchanged_torch: None) -> None:
    # About 1 s.
    def nested(batch: int) -> Callable[[], None]:
        memscope.estimate(mlp(), batch=batch, steps=1)
        return lambda: None

    with pytest.raises(memscope.CaptureError, match="inside a capture"):
        memscope.estimate(nested, batch=2, steps=1)
    assert memscope.estimate(mlp(), batch=2, steps=1).fits  # the next capture works


def test_a_failing_workload_restores_torch(unchanged_torch: None) -> None:
    # Under 1 s.
    def fails(batch: int) -> Callable[[], None]:
        torch.set_default_device("cuda")
        raise KeyError("boom")

    with pytest.raises(memscope.CaptureError, match="KeyError"):
        memscope.estimate(fails, batch=2, steps=1)


# ---- 5. CUDA queries agree with each other and with device= --------------------------------


def queries() -> dict[str, Any]:
    return {
        "available": torch.cuda.is_available(), "count": torch.cuda.device_count(),
        "current": torch.cuda.current_device(),
        "capability": torch.cuda.get_device_capability(),
        "bf16": torch.cuda.is_bf16_supported(), "name": torch.cuda.get_device_name(0),
        "memory": torch.cuda.get_device_properties(0).total_memory,
    }


@pytest.mark.parametrize("device, capability, bf16", [
    ("cuda:0", (9, 0), True), ("a100", (8, 0), True), ("NVIDIA H200", (9, 0), True),
    ("v100", (7, 0), False), ("sm86", (8, 6), True)])
def test_cuda_queries_answer_as_the_gpu_named(device: str, capability: tuple[int, int],
                                              bf16: bool, unchanged_torch: None) -> None:
    # About 1 s each.
    answers: dict[str, Any] = {}

    def workload(batch: int) -> Callable[[], None]:
        answers.update(queries())
        torch.cuda.set_device(0)
        torch.cuda.set_device("cuda:0")
        return mlp()(batch)

    memscope.estimate(workload, batch=2, steps=1, device=device, capacity="40GiB")
    assert answers["available"] and answers["count"] == 1 and answers["current"] == 0
    assert answers["capability"] == capability and answers["bf16"] == bf16
    assert answers["memory"] == 40 * GiB and answers["name"]


def test_another_gpu_is_a_typed_error_naming_the_call(unchanged_torch: None) -> None:
    # Under 1 s.
    def workload(batch: int) -> Callable[[], None]:
        torch.cuda.set_device(1)
        return mlp()(batch)

    with pytest.raises(memscope.CaptureError, match=r"torch\.cuda\.set_device\(1\)"):
        memscope.estimate(workload, batch=2, steps=1)


def test_set_default_device_cuda_allocates_on_the_device_and_is_undone(
        unchanged_torch: None) -> None:
    # About 1 s.
    def workload(batch: int) -> Callable[[], None]:
        torch.set_default_device("cuda")
        assert torch.get_default_device().type == "cuda"
        lin = nn.Linear(256, 256)  # no device: the default, the GPU

        def step() -> None:
            lin(torch.randn(batch, 256)).sum().backward()

        return step

    e = memscope.estimate(workload, batch=4, steps=2, capacity="1GiB")
    assert e.by_category["parameters"] == (256 * 256 + 256) * 4
    assert torch.get_default_device() == torch.device("cpu")


def test_grad_scaler_cuda_stays_enabled_and_steps(unchanged_torch: None) -> None:
    # About 1 s.
    enabled: list[bool] = []

    def workload(batch: int) -> Callable[[], None]:
        model = nn.Linear(128, 128).cuda()
        opt = torch.optim.AdamW(model.parameters())
        scaler = torch.amp.GradScaler("cuda")
        enabled.append(scaler.is_enabled())

        def step() -> None:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = model(torch.randn(batch, 128, device="cuda")).float().square().mean()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)

        return step

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # PyTorch warns when it disables the scaler
        e = memscope.estimate(workload, batch=8, steps=2, capacity="1GiB")
    assert enabled == [True]
    assert e.by_category["optimizer state"] == 2 * (128 * 128 + 128) * 4  # the step ran


# ---- 4. the peak is what the step needs ----------------------------------------------------


def test_a_memory_limit_in_config_applies_to_the_fit_not_to_the_peak() -> None:
    # About 2 s.
    free = memscope.estimate(mlp(1024), batch=64, steps=2, capacity="1GiB")
    limit = free.peak_reserved // 2
    limited = memscope.estimate(mlp(1024), batch=64, steps=2, capacity="1GiB",
                                config=f"memory_limit:{limit}B")
    assert (limited.peak_allocated, limited.peak_reserved) == (free.peak_allocated,
                                                               free.peak_reserved)
    assert sum(limited.by_category.values()) == limited.peak_allocated
    assert free.fits and not limited.fits


def test_a_batch_no_gpu_can_hold_is_an_error_not_a_small_peak() -> None:
    # Under 1 s.
    with pytest.raises(memscope.UsageError, match="more than any GPU"):
        memscope.estimate(mlp(), batch=1 << 40, steps=1)
    with pytest.raises(ValueError, match="more than any GPU"):
        memscope.estimate(mlp(), batch=1 << 45, steps=1)


def test_max_batch_counts_a_batch_no_gpu_can_hold_as_not_fitting() -> None:
    # About 3 s.
    s = memscope.max_batch(mlp(), capacity="1GiB", steps=1, limit=1 << 50)
    assert s.batch > 4 and s.tried[s.batch] and not s.tried[s.batch + 1]


# ---- 9. arguments checked before any capture -----------------------------------------------


@pytest.mark.parametrize("kwargs, error, names", [
    ({"steps": 0}, ValueError, "steps"), ({"steps": True}, TypeError, "steps"),
    ({"limit": 0}, ValueError, "limit"), ({"limit": -5}, ValueError, "limit"),
    ({"workspace_bytes": -1}, ValueError, "workspace_bytes"),
    ({"config": None}, TypeError, "config"), ({"device": None}, TypeError, "device"),
    ({"config": "bogus:1"}, memscope.ConfigError, "bogus"),
    ({"capacity": "24"}, memscope.ConfigError, "has no unit"),
    ({"capacity": 0}, ValueError, "capacity"), ({"capacity": [24]}, TypeError, "capacity")])
def test_max_batch_checks_every_argument_before_a_capture(kwargs: dict[str, Any],
                                                          error: type, names: str) -> None:
    # Milliseconds each: the workload must never run.
    calls: list[int] = []

    def workload(batch: int) -> Callable[[], None]:
        calls.append(batch)
        return mlp()(batch)

    with pytest.raises(error, match=names):
        memscope.max_batch(workload, **kwargs)
    if "limit" not in kwargs:  # estimate takes the others
        with pytest.raises(error, match=names):
            memscope.estimate(workload, batch=2, **kwargs)
    assert calls == []


def test_estimate_refuses_a_workload_that_is_not_callable() -> None:
    # Milliseconds.
    with pytest.raises(TypeError, match="workload"):
        memscope.estimate("train.py", batch=2)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="batch"):
        memscope.estimate(mlp(), batch=2.0)  # type: ignore[arg-type]


def test_a_step_written_as_a_generator_is_refused() -> None:
    # Under 1 s.
    def workload(batch: int) -> Callable[[], Any]:
        model = nn.Linear(64, 64).cuda()

        def step() -> Iterator[None]:
            model(torch.randn(batch, 64, device="cuda")).sum().backward()
            yield

        return step

    with pytest.raises(memscope.CaptureError, match="generator"):
        memscope.estimate(workload, batch=2, steps=1)


def test_a_step_run_on_another_thread_is_refused() -> None:
    # Under 1 s.
    def workload(batch: int) -> Callable[[], None]:
        model = nn.Linear(64, 64).cuda()

        def work() -> None:
            model(torch.randn(batch, 64, device="cuda")).sum().backward()

        def step() -> None:
            t = threading.Thread(target=work, name="trainer")
            t.start()
            t.join()

        return step

    with pytest.raises(memscope.CaptureError, match=r"trainer|another thread|threads"):
        memscope.estimate(workload, batch=2, steps=1)
    with pytest.raises(memscope.CaptureError):
        memscope.max_batch(workload, capacity="1GiB", steps=1)


# ---- 7. sys.exit() in the workload ---------------------------------------------------------


@pytest.mark.parametrize("where", ["setup", "step"])
def test_sys_exit_in_the_workload_is_a_capture_error(where: str,
                                                     unchanged_torch: None) -> None:
    # Under 1 s each.
    def workload(batch: int) -> Callable[[], None]:
        if where == "setup":
            sys.exit(0)

        def step() -> None:
            sys.exit(3)

        return step

    with pytest.raises(memscope.CaptureError, match=r"sys\.exit\((0|3)\)"):
        memscope.estimate(workload, batch=2, steps=1)


# ---- 6. a script in a folder whose name is not UTF-8 ---------------------------------------


def test_a_script_in_a_folder_whose_name_is_not_utf8(tmp_path: Path) -> None:
    # About 4 s: one capture in-process, one through python3 -m memscope._estimate_command.
    folder = Path(os.fsdecode(bytes(tmp_path) + b"/caf\xe9"))
    folder.mkdir()
    script = folder / "train.py"
    script.write_text(textwrap.dedent("""
        import torch

        def workload(batch):
            lin = torch.nn.Linear(32, 32).cuda()

            def step():
                lin(torch.randn(batch, 32, device="cuda")).sum().backward()

            return step
    """))
    import importlib.util

    spec = importlib.util.spec_from_file_location("non_utf8_workload", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    e = memscope.estimate(module.workload, batch=4, steps=1, capacity="1GiB")
    assert e.fits
    out = folder / "e.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    r = subprocess.run([*COMMAND, f"{script}:workload",
                        "--batch", "4", "--capacity", "1GiB", "--json", str(out),
                        "--snapshot", str(folder / "e.pickle")],
                       capture_output=True, env=env)
    assert r.returncode == 0, r.stderr
    assert memscope.load_trace(folder / "e.pickle").events[0] > 0
