"""Growth across iterations: Trace.growth() on traces with boundaries given, read from tags and
detected from the repeating allocations; and the leak patterns users report, reproduced in real
PyTorch code on the CPU and found by memscope.torch.track_growth() at the line that allocated
what leaks. Costs about 2 s (torch's import dominates)."""

from __future__ import annotations

import inspect
import random
from typing import Any

import pytest

import memscope

KiB = 1 << 10
MiB = 1 << 20


def loop_events(iterations: int, leak: int, seed: int = 0,
                tags: bool = False) -> tuple[list[tuple[str, int, int, int, int]], list[int]]:
    """A training loop's events: per iteration 5 temporaries freed within it and, when `leak`,
    one allocation of `leak` bytes at stack 2 kept forever. Returns (events, boundaries)."""
    rng = random.Random(seed)
    sizes = [rng.randrange(1, 64) * KiB for _ in range(5)]
    events: list[tuple[str, int, int, int, int]] = []
    boundaries = []
    addr = 1 << 30
    events.append(("alloc", addr, 8 * MiB, 3, 0))  # the model: kept, made once
    addr += 16 * MiB
    for i in range(iterations):
        boundaries.append(len(events))
        tag = i + 1 if tags else 0
        live = []
        for s in sizes:
            events.append(("alloc", addr, s, 1, tag))
            live.append((addr, s))
            addr += 1 * MiB
        if leak:
            events.append(("alloc", addr, leak, 2, tag))
            addr += 1 * MiB
        for a, s in live:
            events.append(("free_completed", a, s, 0, tag))
    return events, boundaries


STACKS = [[("/home/u/train.py", 40, "step")], [("/home/u/model.py", 88, "forward")],
          [("/home/u/train.py", 12, "main")]]


def test_given_boundaries_find_the_leaking_site() -> None:
    events, bounds = loop_events(10, 4 * MiB)
    r = memscope.Trace.from_events(events, stacks=STACKS).growth(boundaries=bounds)
    assert r.growing and r.boundaries_from == "given" and r.iterations == 9
    (site,) = r.sites
    assert site.where == "model.py:88 forward" and site.bytes_per_iteration == 4 * MiB
    # The leaks of the 8 iterations a whole iteration outlived, live at the last boundary (the
    # last complete iteration's is not counted: nothing came after it yet).
    assert site.iterations == 8 and site.held == 32 * MiB
    assert site.text() == ("model.py:88 forward: +4.00 MiB per iteration over 8 iterations, "
                           "32.00 MiB held")
    assert r.live_at_boundary[1] - r.live_at_boundary[0] == 4 * MiB
    assert "grows: +4.00 MiB per iteration at 1 site" in r.explain()
    assert memscope.Report.from_json(r.to_report().to_json()).to_text() == r.explain()


@pytest.mark.parametrize("seed", range(5))
def test_detected_and_tagged_boundaries_agree_with_given_ones(seed: int) -> None:
    """Seeded loops: the period found in the allocations, and the step numbers in the tags,
    give the same verdict as the true boundaries; a loop without the leak never grows."""
    leak = random.Random(seed).randrange(1, 100) * KiB
    for with_leak in (True, False):
        events, bounds = loop_events(8, leak if with_leak else 0, seed)
        trace = memscope.Trace.from_events(events, stacks=STACKS)
        detected = trace.growth()
        assert detected.boundaries_from.startswith("detected"), detected.boundaries_from
        assert detected.growing == with_leak
        if with_leak:
            assert detected.sites[0].where == "model.py:88 forward"
            assert detected.sites[0].bytes_per_iteration == leak
        events, bounds = loop_events(8, leak if with_leak else 0, seed, tags=True)
        tags = [f"train/step {i + 1}" for i in range(8)]
        tagged = memscope.Trace.from_events(events, tags=tags, stacks=STACKS).growth()
        assert tagged.boundaries_from == "tags" and tagged.growing == with_leak
        assert tagged.boundaries == bounds[1:]


def test_memory_kept_once_is_not_growth() -> None:
    events, bounds = loop_events(10, 0)
    r = memscope.Trace.from_events(events, stacks=STACKS).growth(boundaries=bounds)
    assert not r.growing and "no growth" in r.explain()
    with pytest.raises(memscope.UsageError, match="boundary 1"):
        memscope.Trace.from_events(events, stacks=STACKS).growth(boundaries=[5, 3])


# ---- real PyTorch code on the CPU ---------------------------------------------------------

torch = pytest.importorskip("torch")
import memscope.torch  # noqa: E402


def _line_of(fn: Any, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def _model() -> Any:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 1))


def loss_accumulated_without_detach(steps: int) -> None:
    model = _model()
    total = torch.zeros(())
    for _ in range(steps):
        x = torch.randn(64, 64)
        loss = model(x).pow(2).mean()  # LEAK: each step's graph stays reachable from total
        total = total + loss
        memscope.torch.step()


def tensors_kept_in_a_list(steps: int) -> None:
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    kept = []
    for _ in range(steps):
        x = torch.randn(64, 64)
        hidden = model[0](x)  # LEAK: kept below
        loss = model[2](hidden.relu()).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        kept.append(hidden.detach())
        memscope.torch.step()


def _failing_step(x: Any) -> None:
    buffer = torch.randn(256, 256)  # LEAK: held by the traceback's frame
    if buffer.numel() > 0:
        raise ValueError(f"bad batch of {x.shape[0]}")


def tracebacks_kept(steps: int) -> None:
    errors = []
    for _ in range(steps):
        try:
            _failing_step(torch.randn(8, 8))
        except ValueError as e:
            errors.append(e)  # the exception keeps its traceback, its frames, their locals
        memscope.torch.step()


def clean_loop(steps: int) -> None:
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(steps):
        loss = model(torch.randn(64, 64)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        memscope.torch.step()


@pytest.mark.parametrize("job, where", [
    (loss_accumulated_without_detach, (loss_accumulated_without_detach, "LEAK")),
    (tensors_kept_in_a_list, (tensors_kept_in_a_list, "LEAK")),
    (tracebacks_kept, (_failing_step, "LEAK")),
])
def test_leak_patterns_are_found_at_their_line(job: Any, where: Any) -> None:
    with memscope.torch.track_growth() as tracker:
        with pytest.warns(memscope.torch.MemoryGrowthWarning, match="grows across iterations"):
            job(8)
    r = tracker.result
    assert r is not None and r.growing
    line = _line_of(*where)
    top = r.sites[0]
    assert (top.filename, top.line) == (__file__, line), r.explain()
    assert top.iterations >= 3 and top.bytes_per_iteration > 0


def test_a_clean_loop_does_not_grow_and_fail_on_growth_raises() -> None:
    with memscope.torch.track_growth(fail_on_growth=True) as tracker:
        clean_loop(8)
    assert tracker.result is not None and not tracker.result.growing
    with memscope.torch.track_growth(fail_on_growth=True):
        with pytest.raises(memscope.torch.MemoryGrowthError) as raised:
            tensors_kept_in_a_list(8)
    assert raised.value.result.sites[0].line == _line_of(tensors_kept_in_a_list, "LEAK")


def test_the_optimizer_step_marks_the_boundaries() -> None:
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    kept = []
    with memscope.torch.track_growth(optimizer=opt, fail_on_growth=True):
        with pytest.raises(memscope.torch.MemoryGrowthError):
            for _ in range(8):
                loss = model(torch.randn(64, 64)).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                kept.append(torch.randn(128, 128))
                opt.step()
