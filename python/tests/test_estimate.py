"""memscope.estimate / max_batch: a training step written for "cuda", captured on fake tensors
on a machine without a GPU, compared with what a CPU eager run of the same step allocates and
with bytes computed by hand; Trace.from_events; the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import memscope

torch = pytest.importorskip("torch")
# The command line, as `memscope estimate` execs it.
COMMAND = [sys.executable, "-m", "memscope._estimate_command"]
nn = torch.nn
MiB = 1 << 20


def mlp_workload(width: int = 256, foreach: bool = True) -> Callable[[int], Callable[[], None]]:
    def workload(batch: int) -> Callable[[], None]:
        model = nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, 10)).cuda()
        opt = torch.optim.AdamW(model.parameters(), foreach=foreach)

        def step() -> None:
            x = torch.randn(batch, 64, device="cuda")
            loss = model(x).logsumexp(-1).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        return step

    return workload


def mlp_params(width: int = 256) -> int:
    return 64 * width + width + width * 10 + 10


def transformer_workload(device: str) -> Callable[[int], Callable[[], None]]:
    def workload(batch: int) -> Callable[[], None]:
        torch.manual_seed(0)
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True).to(device)
        opt = torch.optim.AdamW(layer.parameters(), foreach=True)

        def step() -> None:
            x = torch.randn(batch, 16, 32, device=device)
            layer(x).square().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        return step

    return workload


def test_import_memscope_does_not_import_torch() -> None:
    code = "import sys, memscope; memscope.estimate; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.stdout.strip() == "False"


def test_parameter_gradient_and_optimizer_bytes_match_hand_computed() -> None:
    from memscope import _capture

    c = _capture.capture(mlp_workload(), batch=8, steps=2, workspace_bytes=0)
    live: dict[int, int] = {}
    by_cat: dict[str, int] = {}
    for action, addr, size, _, _ in c.events[: c.step_ends[-1]]:
        if action == "alloc":
            live[addr] = size
        else:
            del live[addr]
    for addr, size in live.items():
        cat = c.allocations[addr].category
        by_cat[cat] = by_cat.get(cat, 0) + size
    p = mlp_params() * 4
    assert by_cat["parameters"] == p
    assert by_cat["optimizer state"] == 2 * p  # exp_avg, exp_avg_sq (step counts: host)
    assert "gradients" not in by_cat  # zero_grad(set_to_none=True)
    grads = sum(a.size for a in c.allocations.values() if a.category == "gradients")
    assert grads == 2 * p  # one set per step
    # AdamW's step counts live on the host: never recorded, or recorded and then found there.
    assert all(a.size <= 8 for a in c.allocations.values() if a.category == "host")


def test_categories_add_up_to_the_peak() -> None:
    e = memscope.estimate(mlp_workload(), batch=16, steps=3, capacity="1GiB")
    assert sum(e.by_category.values()) == e.peak_allocated
    assert 0 <= e.by_category["allocator rounding"] < 64 * 512
    assert e.by_category["parameters"] == mlp_params() * 4
    assert e.by_category["workspaces"] == 2 * 32 * MiB  # the step's and autograd's cuBLAS
    assert e.fits and e.peak_reserved >= e.peak_allocated
    assert "not modelled" in e.explain() and "cuDNN" in e.explain()
    assert e.to_dict()["peak_allocated"] == e.peak_allocated


def _eager_sequence(workload: Callable[[int], Callable[[], None]], batch: int,
                    steps: int) -> list[tuple[str, int]]:
    """(action, bytes) of every storage a CPU eager run of the last step creates and frees."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    step = workload(batch)
    for _ in range(steps - 1):
        step()
    seen: dict[int, Any] = {}
    events: list[tuple[str, int]] = []

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            inputs = tree_flatten((args, kwargs or {}))[0]
            for t in inputs:  # storages from before the step are not new
                if isinstance(t, torch.Tensor):
                    s = t.untyped_storage()
                    if s._cdata not in seen:  # forgotten when freed: its address may be reused
                        seen[s._cdata] = weakref.ref(
                            s, lambda _, k=s._cdata: seen.pop(k, None))
            out = func(*args, **(kwargs or {}))
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor):
                    s = t.untyped_storage()
                    if s._cdata not in seen and s.nbytes():
                        n = s.nbytes()
                        events.append(("alloc", n))

                        def gone(_: Any, k: int = s._cdata, n: int = n) -> None:
                            seen.pop(k, None)
                            events.append(("free_completed", n))

                        seen[s._cdata] = weakref.ref(s, gone)
            return out

    with Log():
        step()
    del step
    return events


def test_capture_matches_a_cpu_eager_run_alloc_for_alloc() -> None:
    from memscope import _capture

    steps = 2
    eager = _eager_sequence(transformer_workload("cpu"), batch=4, steps=steps)
    c = _capture.capture(transformer_workload("cuda"), batch=4, steps=steps, workspace_bytes=0)
    host = {a.addr for a in c.allocations.values() if a.category == "host"}
    last = [(action, size) for action, addr, size, _, _ in c.events[c.step_starts[-1]:]
            if addr not in host and c.allocations[addr].phase != "setup"]
    eager_allocs = sorted(n for a, n in eager if a == "alloc")
    capture_allocs = sorted(n for a, n in last if a == "alloc")
    assert capture_allocs == eager_allocs
    # Lifetimes: the live bytes after each event agree up to the last step's end.
    def live_curve(seq: list[tuple[str, int]]) -> list[int]:
        out, now = [], 0
        for action, n in seq:
            now += n if action == "alloc" else -n
            out.append(now)
        return out

    assert max(live_curve(last)) == max(live_curve(eager[: len(last)]))


def test_a_value_read_during_the_step_is_a_capture_error_naming_the_op() -> None:
    def workload(batch: int) -> Callable[[], None]:
        w = torch.ones(4, device="cuda", requires_grad=True)

        def step() -> None:
            loss = (w * batch).sum()
            print(loss.item())

        return step

    with pytest.raises(memscope.CaptureError, match="_local_scalar_dense") as info:
        memscope.estimate(workload, batch=2, steps=1)
    assert info.value.op is not None and "_local_scalar_dense" in info.value.op
    assert isinstance(info.value, memscope.Error)

    def nonzero(batch: int) -> Callable[[], None]:
        def step() -> None:
            torch.randn(batch, device="cuda").nonzero()

        return step

    with pytest.raises(memscope.CaptureError, match="nonzero"):
        memscope.estimate(nonzero, batch=2, steps=1)


def test_max_batch_is_monotone_and_agrees_with_batch_plus_and_minus_one() -> None:
    work = mlp_workload(width=1024)
    s = memscope.max_batch(work, capacity="80MiB", steps=2)
    assert s.batch > 1
    assert all(ok == (b <= s.batch) for b, ok in s.tried.items())
    assert memscope.estimate(work, batch=s.batch, steps=2, capacity="80MiB").fits
    assert not memscope.estimate(work, batch=s.batch + 1, steps=2, capacity="80MiB").fits
    assert memscope.estimate(work, batch=s.batch - 1, steps=2, capacity="80MiB").fits
    assert str(s.batch) in s.explain()


def test_conv_net_parameters_and_peak() -> None:
    def workload(batch: int) -> Callable[[], None]:
        net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                            nn.Conv2d(16, 8, 3, padding=1), nn.Flatten(),
                            nn.Linear(8 * 16 * 16, 10)).cuda()
        opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)

        def step() -> None:
            x = torch.randn(batch, 3, 16, 16, device="cuda")
            nn.functional.cross_entropy(net(x), torch.zeros(batch, dtype=torch.long,
                                                            device="cuda")).backward()
            opt.step()
            opt.zero_grad()

        return step

    e = memscope.estimate(workload, batch=32, steps=2, capacity="1GiB")
    params = (3 * 16 * 9 + 16) + 2 * 16 + (16 * 8 * 9 + 8) + (8 * 256 * 10 + 10)
    buffers = 2 * 16 * 4 + 8  # running mean/var (fp32), num_batches_tracked (int64)
    assert e.by_category["parameters"] == params * 4 + buffers
    assert sum(e.by_category.values()) == e.peak_allocated
    # 32 activations of the first conv alone: 32 * 16 * 16 * 16 fp32.
    assert e.peak_allocated > 32 * 16 * 16 * 16 * 4


def test_trace_from_events_checks_its_input_and_replays() -> None:
    t = memscope.Trace.from_events(
        [("alloc", 0x1000, 3 * MiB, 1, 1), ("alloc", 0x2000, 100, 0, 1),
         ("free_completed", 0x1000, 3 * MiB, 0, 0)],
        tags=["step"], stacks=[[("model.py", 3, "forward")]])
    r = t.replay(capacity="1GiB", series=True)
    assert isinstance(r, memscope.ReplayResult)
    assert [s[2] for s in r.series] == [3 * MiB, 3 * MiB + 100, 100]
    assert r.peak.tag == "step"
    with pytest.raises(ValueError, match="unknown action 'malloc'"):
        memscope.Trace.from_events([("malloc", 1, 1, 0, 0)])
    with pytest.raises(ValueError, match="out of range"):
        memscope.Trace.from_events([("alloc", 1, 1, 0, 2)], tags=["one"])


def test_command_line(tmp_path: Path) -> None:
    script = tmp_path / "work.py"
    script.write_text(textwrap.dedent("""
        import torch
        def workload(batch):
            m = torch.nn.Linear(32, 32).cuda()
            def step():
                m(torch.randn(batch, 32, device="cuda")).sum().backward()
            return step
    """))
    out = tmp_path / "e.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    r = subprocess.run([*COMMAND, f"{script}:workload",
                        "--batch", "4", "--capacity", "1GiB", "--json", str(out)],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "peak allocated" in r.stdout
    figures = json.loads(out.read_text())["estimate"]
    assert figures["batch"] == 4 and figures["fits"] is True
    bad = subprocess.run([*COMMAND, f"{tmp_path}/no.py:f"],
                         capture_output=True, text=True, env=env)
    assert bad.returncode == 3 and "no such file" in bad.stderr  # an input error


def test_autocast_cuda_keeps_cudas_fp32_ops_in_fp32() -> None:
    from memscope import _capture

    def workload(batch: int) -> Callable[[], None]:
        lin = nn.Linear(64, 128).cuda()

        def step() -> None:
            x = torch.randn(batch, 64, device="cuda")
            with torch.autocast("cuda", dtype=torch.bfloat16):
                y = lin(x)                       # CUDA autocast: bf16
                p = torch.softmax(y, dim=-1)     # CUDA autocast: fp32
                q = y.exp()                      # CUDA autocast: fp32
            (p.sum() + q.sum()).backward()

        return step

    c = _capture.capture(workload, batch=32, steps=1, workspace_bytes=0)
    forward = {a.op: a.size for a in c.allocations.values() if a.phase == "forward"}
    assert forward["addmm"] == 32 * 128 * 2
    step_ops = [(a.op, a.size) for a in c.allocations.values() if a.phase == "step"]
    assert ("_softmax", 32 * 128 * 4) in step_ops
    assert ("exp", 32 * 128 * 4) in step_ops


def test_code_that_asks_for_a_gpu_finds_one_during_the_capture() -> None:
    def workload(batch: int) -> Callable[[], None]:
        device = "cuda" if torch.cuda.is_available() else "cpu"
        lin = nn.Linear(256, 256).to(device)

        def step() -> None:
            lin(torch.randn(batch, 256, device=device)).sum().backward()
            torch.cuda.synchronize()

        return step

    e = memscope.estimate(workload, batch=4, steps=2, capacity="1GiB")
    assert e.by_category["parameters"] == (256 * 256 + 256) * 4
    assert not torch.cuda.is_available()  # restored after the capture
