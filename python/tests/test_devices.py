"""The whole card (memscope._devices): the device table, capacity="h100-80gb" and --device h100
answering for the card (context, allocator reserved, what is left), typed errors for names the
table does not know, cuDNN's convolution workspaces as PyTorch requests them, the steady step's
peak reserved; and, on a GPU, the context and handles measured against the table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

import memscope
from memscope import _devices

torch = pytest.importorskip("torch")
nn = torch.nn
MiB = 1 << 20
COMMAND = [sys.executable, "-m", "memscope._estimate_command"]


def mlp(batch: int) -> Callable[[], None]:
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)).cuda()
    opt = torch.optim.AdamW(model.parameters())

    def step() -> None:
        model(torch.randn(batch, 64, device="cuda")).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def convnet(batch: int) -> Callable[[], None]:
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                          nn.Conv2d(8, 16, 3, padding=1), nn.Flatten(),
                          nn.Linear(16 * 32 * 32, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step() -> None:
        model(torch.randn(batch, 3, 32, 32, device="cuda")).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


# ---- the table ------------------------------------------------------------------------------

def test_every_card_says_where_each_figure_comes_from() -> None:
    for c in _devices.CARDS:
        for f in (c.usable, c.context, c.cublas_handle, c.cudnn_handle):
            assert f.bytes > 0 and f.source
            # Only what this project measured on a GPU says "measured:"; the rest says it was not.
            assert f.measured == f.source.startswith("measured:"), (c.name, f.source)
            assert f.measured or "not measured" in f.source, (c.name, f.source)
        assert c.outside(2, 1) == c.context.bytes + 2 * c.cublas_handle.bytes + \
            c.cudnn_handle.bytes
    assert _devices.card("H100") is _devices.card("h100-80gb")
    assert _devices.card("NVIDIA H100 80GB HBM3") is _devices.card("h100-80gb")
    assert _devices.card("h200").usable.measured  # the project's own GPU run
    assert _devices.card("a100") is None  # two cards: 40 and 80 GB


def test_capability_and_cublas_workspace_follow_pytorchs_rule() -> None:
    assert _devices.capability("cuda:0") == (9, 0)
    assert _devices.capability("NVIDIA A100-SXM4-80GB") == (8, 0)
    assert _devices.capability("a10g") == (8, 6)  # the card, not the a100 family inside
    assert _devices.capability("t4") == (7, 5)
    # CublasHandlePool.cpp: 32 MiB for major 9 to 12, 8 MiB + 128 KiB before.
    assert _devices.cublas_workspace((9, 0)) == 32 * MiB
    assert _devices.cublas_workspace((12, 0)) == 32 * MiB
    assert _devices.cublas_workspace((8, 9)) == 8 * MiB + 128 * 1024


@pytest.mark.parametrize("call", [
    lambda: memscope.estimate(mlp, batch=2, device="h900"),
    lambda: memscope.max_batch(mlp, device="rtx 9090"),
])
def test_an_unknown_device_is_a_typed_error_listing_the_known_ones(call: Callable[[], None]
                                                                   ) -> None:
    with pytest.raises(memscope.UnknownDeviceError) as err:
        call()
    assert isinstance(err.value, ValueError) and isinstance(err.value, memscope.UsageError)
    assert "device:" in str(err.value)
    for name in ("h100-80gb", "h200", "a100-40gb", "cuda:N"):
        assert name in str(err.value)


@pytest.mark.parametrize("capacity", ["h100-90gb", "a100", "gpu"])
def test_a_capacity_naming_no_card_is_a_typed_error_listing_the_cards(capacity: str) -> None:
    with pytest.raises(memscope.UnknownDeviceError) as err:
        memscope.estimate(mlp, batch=2, capacity=capacity)
    assert "capacity:" in str(err.value) and "h100-80gb" in str(err.value)
    assert "24GiB" in str(err.value)


def test_a_capacity_and_a_device_naming_different_gpus_are_refused() -> None:
    with pytest.raises(ValueError, match="name different GPUs"):
        memscope.estimate(mlp, batch=2, device="a100", capacity="h100-80gb")


# ---- the whole card -------------------------------------------------------------------------

def test_a_card_capacity_answers_for_the_card() -> None:
    card = _devices.card("h100-80gb")
    assert card is not None
    e = memscope.estimate(mlp, batch=4, steps=2, capacity="h100-80gb")
    u = e.card
    assert u is not None and u.card == "h100-80gb" and e.device == "h100-80gb"
    assert u.total == card.usable.bytes
    # Matrix multiplies on the step's thread and on autograd's: two cuBLAS handles; no cuDNN.
    assert u.cublas_handles == 2 * card.cublas_handle.bytes and u.cudnn_handles == 0
    assert u.context == card.context.bytes
    assert e.capacity == u.total - u.outside  # the allocator's share
    assert u.reserved == e.peak_reserved and u.left == e.capacity - e.peak_reserved
    assert e.workspace_bytes == 32 * MiB  # the card's capability picks cuBLAS's workspace
    text = e.explain()
    for line in ("card", "outside the allocator", "allocator reserved", "left on the card",
                 "not measured"):
        assert line in text
    assert e.to_dict()["card"]["left"] == u.left


def test_the_device_alone_names_the_card_and_bytes_keep_meaning_the_allocators_share() -> None:
    e = memscope.estimate(mlp, batch=2, steps=2, device="h200")
    assert e.card is not None and e.card.card == "h200"
    b = memscope.estimate(mlp, batch=2, steps=2, device="h200", capacity="24GiB")
    assert b.card is None and b.capacity == 24 << 30
    g = memscope.estimate(mlp, batch=2, steps=2)  # "cuda:0" names no card: 24 GiB as before
    assert g.card is None and g.capacity == 24 << 30


def test_the_fit_is_decided_on_what_the_context_and_handles_leave() -> None:
    t4 = _devices.card("t4")
    assert t4 is not None
    big = t4.usable.bytes - t4.context.bytes // 2  # fits the card, not what the context leaves

    def work(batch: int) -> Callable[[], None]:
        w = torch.randn(8, 8, device="cuda")

        def step() -> None:
            x = torch.empty(big, dtype=torch.uint8, device="cuda")
            (w @ w).sum()
            del x

        return step

    on_card = memscope.estimate(work, batch=1, steps=1, capacity="t4")
    assert on_card.card is not None and not on_card.fits and on_card.card.left < 0
    assert "short by" in on_card.explain()
    as_bytes = memscope.estimate(work, batch=1, steps=1, device="t4",
                                 capacity=t4.usable.bytes)
    assert as_bytes.fits  # the same bytes as the allocator's share: it fits


def test_max_batch_on_a_card_searches_the_allocators_share() -> None:
    s = memscope.max_batch(mlp, capacity="t4", steps=1, limit=8)
    t4 = _devices.card("t4")
    assert t4 is not None
    assert s.card == "t4" and s.capacity == t4.usable.bytes - t4.outside(2, 0)
    assert s.batch == 8 and "t4 (the allocator's share" in s.explain()


def _script(tmp_path: Path) -> str:
    p = tmp_path / "work.py"
    p.write_text(textwrap.dedent("""
        import torch, torch.nn as nn
        def workload(batch):
            m = nn.Linear(16, 16).cuda()
            def step():
                m(torch.randn(batch, 16, device="cuda")).sum().backward()
            return step
    """))
    return f"{p}:workload"


def test_the_command_answers_for_the_card_its_device_names(tmp_path: Path) -> None:
    out = tmp_path / "est.json"
    r = subprocess.run([*COMMAND, _script(tmp_path), "--device", "h100", "--batch", "2",
                        "--steps", "1", "--json", str(out)], capture_output=True, text=True,
                       env=os.environ, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "left on the card" in r.stdout and "h100-80gb" in r.stdout
    card = json.loads(out.read_text())["estimate"]["card"]
    assert card["name"] == "h100-80gb" and card["left"] > 0


def test_the_command_refuses_an_unknown_device_with_the_known_names(tmp_path: Path) -> None:
    out = tmp_path / "est.json"
    r = subprocess.run([*COMMAND, _script(tmp_path), "--device", "h900", "--json", str(out)],
                       capture_output=True, text=True, env=os.environ, timeout=300)
    assert r.returncode == 2 and "h100-80gb" in r.stderr and "--device" not in r.stdout
    assert not out.exists()  # nothing half-written
    r = subprocess.run([*COMMAND, _script(tmp_path), "--capacity", "h100-90gb"],
                       capture_output=True, text=True, env=os.environ, timeout=300)
    assert r.returncode == 2 and "--capacity" in r.stderr and "h200" in r.stderr


# ---- reserved as the GPU reserves it ---------------------------------------------------------

def _conv_workspaces(c: object) -> list[tuple[str, int]]:
    return [(a.phase, a.size) for a in c.allocations.values()  # type: ignore[attr-defined]
            if a.op == "cuDNN conv workspace"]


def test_cudnn_conv_workspaces_are_requested_per_call_and_freed_when_it_returns() -> None:
    from memscope import _attention, _capture

    c = _capture.capture(convnet, 4, 1, 0, gpu=_attention.gpu_for("h100"))
    ws = _conv_workspaces(c)
    f32 = 4
    x, h, y = 4 * 3 * 32 * 32 * f32, 4 * 8 * 32 * 32 * f32, 4 * 16 * 32 * 32 * f32
    # Forward: one per convolution, the larger of its input and output activation. Backward:
    # the second conv computes its input's and its weight's gradients (two calls); the first
    # only its weight's (the images need no gradient).
    assert sorted(s for p, s in ws if p == "forward") == sorted([max(x, h), max(h, y)])
    assert sorted(s for p, s in ws if p == "backward") == sorted([max(h, y), max(h, y),
                                                                  max(x, h)])
    # Each is freed at once: the event after its alloc is its free.
    for i, e in enumerate(c.events):
        a = c.allocations.get(e[1])
        if e[0] == "alloc" and a is not None and a.op == "cuDNN conv workspace":
            assert c.events[i + 1][:2] == ("free_completed", e[1])
    assert c.cudnn_threads == {"step", "backward"}


def test_without_cudnn_convolutions_request_no_workspace() -> None:
    from memscope import _attention, _capture

    with torch.backends.cudnn.flags(enabled=False):
        c = _capture.capture(convnet, 4, 1, 0, gpu=_attention.gpu_for("h100"))
    assert _conv_workspaces(c) == [] and c.cudnn_threads == set()


def test_conv_workspaces_go_through_the_replay_and_count_cudnn_handles() -> None:
    with_ws = memscope.estimate(convnet, batch=64, steps=2, capacity="h100-80gb")
    with torch.backends.cudnn.flags(enabled=False):
        without = memscope.estimate(convnet, batch=64, steps=2, capacity="h100-80gb")
    # The peak falls inside a backward convolution call: its workspace is live there.
    assert with_ws.peak_allocated > without.peak_allocated
    assert with_ws.peak_reserved >= without.peak_reserved
    assert with_ws.card is not None and with_ws.card.cudnn_handles > 0
    assert without.card is not None and without.card.cudnn_handles == 0


def test_peak_reserved_is_the_steady_steps_as_max_memory_reserved_reads_it() -> None:
    e = memscope.estimate(mlp, batch=4, steps=3)
    first, end = e.step_bounds[-1]
    window = range(max(0, first - 1), end)
    assert e.peak_reserved == max(e.series[i][0] for i in window)
    assert e.peak_reserved >= e.peak_allocated


# ---- on a GPU -------------------------------------------------------------------------------

_MEASURE = textwrap.dedent("""
    import json, torch
    def outside():  # the device's used memory (cudaMemGetInfo) less the allocator's reserve
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        return total - free - torch.cuda.memory_reserved()
    torch.zeros(1, device="cuda")
    context = outside()
    a = torch.randn(256, 256, device="cuda"); (a @ a).sum().item()
    cublas = outside() - context
    x = torch.randn(8, 3, 64, 64, device="cuda")
    torch.nn.functional.conv2d(x, torch.randn(8, 3, 3, 3, device="cuda")).sum().item()
    cudnn = outside() - context - cublas
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                      "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
                      "total_memory": torch.cuda.get_device_properties(0).total_memory,
                      "context": context, "cublas": cublas, "cudnn_handle": cudnn}))
""")



@pytest.mark.gpu
def test_context_and_handles_measured_on_this_gpu_against_the_table(tmp_path: Path) -> None:
    """Measures, in a fresh process on an otherwise idle GPU, what the CUDA context, the first
    cuBLAS and the first cuDNN call hold outside the caching allocator (the device's used memory
    by cudaMemGetInfo, less memory_reserved), writes it to $MEMSCOPE_DEVICE_MEASUREMENT (or the
    test's folder) for the table, and checks the table's figures for this card within 25% (or
    64 MiB). Owed: no GPU was lent when this
    was written."""
    r = subprocess.run([sys.executable, "-c", _MEASURE], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout.strip().splitlines()[-1])
    Path(os.environ.get("MEMSCOPE_DEVICE_MEASUREMENT", tmp_path / "device.json")).write_text(
        json.dumps(m, indent=2) + "\n")
    card = _devices.card(m["device"])
    if card is None:
        pytest.skip(f"{m['device']} is not in the table; measured: {m}")

    def near(table: int, measured: int) -> bool:
        return abs(table - measured) <= max(64 * MiB, table // 4)

    assert near(card.usable.bytes, m["total_memory"]), m
    assert near(card.context.bytes, m["context"]), m
    assert near(card.cublas_handle.bytes, m["cublas"]), m
    assert near(card.cudnn_handle.bytes, m["cudnn_handle"]), m
