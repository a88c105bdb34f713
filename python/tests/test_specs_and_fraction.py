"""The one parser of backend specs (memscope._memscope.BackendSpec) and the one
fraction-to-limit rule (Allocator.set_memory_fraction), as Python reaches them."""

from __future__ import annotations

import math

import pytest

import memscope
from memscope import _memscope

GiB = 1 << 30


def test_backend_spec_parses_every_form() -> None:
    host = _memscope.BackendSpec("host")
    assert (host.type, host.capacity, host.index, str(host)) == ("host", None, None, "host")
    sim = _memscope.BackendSpec("sim:24 gib")
    assert (sim.type, sim.capacity, sim.index, str(sim)) == ("sim", 24 * GiB, None, "sim:24GiB")
    cuda = _memscope.BackendSpec("cuda")
    assert (cuda.type, cuda.capacity, cuda.index, str(cuda)) == ("cuda", None, 0, "cuda:0")
    assert _memscope.BackendSpec("cuda:3").index == 3
    assert _memscope.BackendSpec("sim:1024MiB") == _memscope.BackendSpec("sim:1GiB")
    assert hash(_memscope.BackendSpec("sim:1024MiB")) == hash(_memscope.BackendSpec("sim:1GiB"))
    assert _memscope.BackendSpec("host") != "host"
    assert repr(sim) == "BackendSpec('sim:24GiB')"


@pytest.mark.parametrize("bad", ["", "nvidia", "sim:", "sim:0", "sim:lots", "cuda:x", "cuda:-1"])
def test_backend_spec_rejects_bad_specs_naming_them(bad: str) -> None:
    with pytest.raises(memscope.ConfigError) as info:
        _memscope.BackendSpec(bad)
    assert info.value.key == "backend"
    assert info.value.value == bad


def test_canonical_spec_is_the_allocators_backend(sim_spec: str) -> None:
    a = memscope.default_allocator(sim_spec)
    assert a.backend == str(_memscope.BackendSpec(sim_spec))
    spaced = sim_spec.replace("MiB", " mib")  # another spelling: the same default allocator
    assert memscope.default_allocator(spaced) is a
    assert _memscope._default_allocator(spaced) == _memscope._default_allocator(sim_spec)


def test_set_memory_fraction_sets_the_limit() -> None:
    a = memscope.Allocator("sim:8GiB")
    a.set_memory_fraction(0.25)
    assert a.memory_limit == 2 * GiB
    a.set_memory_fraction(1.0)
    assert a.memory_limit == 8 * GiB


@pytest.mark.parametrize("fraction", [0.0, -0.1, 1.5, math.nan, math.inf])
def test_set_memory_fraction_refuses_outside_zero_to_one(fraction: float) -> None:
    a = memscope.Allocator("sim:8GiB")
    before = a.memory_limit
    with pytest.raises(memscope.ConfigError, match=r"memory fraction .* is not in \(0, 1\]") as e:
        a.set_memory_fraction(fraction)
    assert e.value.key == "memory_fraction"
    assert a.memory_limit == before


def test_module_fraction_goes_through_the_allocator(sim_spec: str) -> None:
    a = memscope.default_allocator(sim_spec)
    memscope.set_per_process_memory_fraction(0.5, sim_spec)
    assert a.memory_limit == a.capacity // 2
    with pytest.raises(memscope.ConfigError, match="memory fraction 0"):
        memscope.set_per_process_memory_fraction(0.0, sim_spec)
    assert a.memory_limit == a.capacity // 2
