"""The C entry points PyTorch's CUDAPluggableAllocator calls, exercised through ctypes with
PyTorch's own signatures (the hooks are pointed at a simulated device where there is no GPU),
and the PyTorch integration itself where torch and a GPU are present."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap

import pytest

import memscope

from conftest import MiB

SYMBOLS = ["memscope_torch_malloc", "memscope_torch_free", "memscope_torch_record_stream",
           "memscope_torch_empty_cache", "memscope_torch_set_memory_fraction"]


@pytest.fixture
def hooks(sim_spec: str):
    lib = ctypes.CDLL(memscope._memscope.__file__)  # what CUDAPluggableAllocator does
    lib.memscope_torch_malloc.argtypes = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
    lib.memscope_torch_malloc.restype = ctypes.c_void_p
    lib.memscope_torch_free.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int,
                                        ctypes.c_void_p]
    lib.memscope_torch_record_stream.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.memscope_torch_set_memory_fraction.argtypes = [ctypes.c_double, ctypes.c_int]
    memscope._memscope._redirect_torch_hooks(sim_spec)
    yield lib, sim_spec
    memscope._memscope._redirect_torch_hooks("")


def test_symbols_are_exported() -> None:
    lib = ctypes.CDLL(memscope._memscope.__file__)
    for name in SYMBOLS:
        assert getattr(lib, name)


def test_hooks_share_the_default_allocator(hooks) -> None:
    lib, spec = hooks
    p = lib.memscope_torch_malloc(3 * MiB, 0, ctypes.c_void_p(0))
    assert p and memscope.memory_allocated(spec) == 3 * MiB
    assert memscope.default_allocator(spec).lookup(p)["requested_size"] == 3 * MiB
    lib.memscope_torch_record_stream(p, ctypes.c_void_p(0))
    lib.memscope_torch_free(p, 3 * MiB, 0, ctypes.c_void_p(0))
    assert memscope.memory_allocated(spec) == 0
    lib.memscope_torch_free(p, 3 * MiB, 0, None)  # a late or foreign free is ignored
    assert memscope.memory_stats(spec)["num_invalid_frees"] == 1
    assert lib.memscope_torch_malloc(0, 0, None) is None
    lib.memscope_torch_empty_cache()
    assert memscope.memory_reserved(spec) == 0
    lib.memscope_torch_set_memory_fraction(0.5, 0)
    assert memscope.default_allocator(spec).memory_limit == memscope.mem_get_info(spec)[1] // 2


def test_torch_source_needs_torch() -> None:
    pytest.importorskip("torch", reason="PyTorch is not installed")
    import memscope.torch as mt

    assert mt.library_path() == memscope._memscope.__file__


def test_torch_source_cascades_pytorchs_one_peak_counter() -> None:
    """memscope.torch.torch_source() over a stand-in for torch.cuda's counters (one allocated
    value and one resettable peak, as PyTorch keeps per device), in a fresh process so the
    stand-in never meets a real torch: nested stages are exact through the C++ cascade rule."""
    script = textwrap.dedent("""
        import sys, types
        counters = {"allocated": 0, "peak": 0, "resets": 0}
        def allocate(n):
            counters["allocated"] += n
            counters["peak"] = max(counters["peak"], counters["allocated"])
        def reset(device):
            counters["peak"] = counters["allocated"]
            counters["resets"] += 1
        cuda = types.SimpleNamespace(
            is_available=lambda: True, current_device=lambda: 0,
            memory_allocated=lambda device: counters["allocated"],
            max_memory_allocated=lambda device: counters["peak"],
            reset_peak_memory_stats=reset)
        sys.modules["torch"] = types.SimpleNamespace(cuda=cuda)
        import memscope, memscope.torch as mt
        src = mt.torch_source()
        assert src is mt.torch_source(0) and isinstance(src, memscope.MemorySource)
        assert src.name == "torch.cuda:0" and src.kind == "gpu" and src.available
        t = memscope.Tracker([src], implicit_init=False)
        with t.stage("train"):
            allocate(100); allocate(-100)
            with t.stage("eval"):  # resets PyTorch's peak: train's 100 must survive
                allocate(30); allocate(-20)
        m = t.metrics
        assert m["train_mem_gpu_peaked_delta"] == 100 - 10, m
        assert m["eval_mem_gpu_peaked_delta"] == 30 - 10, m
        assert counters["resets"] == 2
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("ok")


@pytest.mark.gpu
def test_pytorch_model_with_memscope_as_allocator(tmp_path) -> None:
    """A small model's forward/backward with memscope allocating for PyTorch: statistics agree
    with the tensors, nested peaks work, empty_cache is visible to NVML. Runs in a fresh
    process because PyTorch refuses to swap an allocator it has already used."""
    pytest.importorskip("torch", reason="PyTorch is not installed")
    script = textwrap.dedent("""
        import torch, memscope, memscope.torch as mt
        mt.use_as_allocator()
        dev = torch.device("cuda:0")
        model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                    torch.nn.Linear(4096, 1024)).to(dev)
        params = sum(p.numel() * p.element_size() for p in model.parameters())
        assert memscope.memory_allocated(0) >= params, (memscope.memory_allocated(0), params)
        t = memscope.Tracker()
        with t.stage("train"):
            x = torch.randn(256, 1024, device=dev)
            with t.stage("eval"):
                with torch.no_grad():
                    model(x)
            loss = model(x).square().mean()
            loss.backward()
            torch.cuda.synchronize()
        m = t.metrics
        assert m["train_mem_gpu_peaked_delta"] > 0 and m["eval_mem_gpu_peaked_delta"] > 0
        big = torch.empty(1536 << 20, dtype=torch.uint8, device=dev)
        del big
        torch.cuda.synchronize()
        used_before = memscope.device_memory_used(0)
        released = memscope.empty_cache(0)
        used_after = memscope.device_memory_used(0)
        assert released >= 1536 << 20, released
        assert abs((used_before - used_after) - released) <= 2 << 20, (used_before, used_after, released)
        print("ok", m["train_mem_gpu_peaked_delta"], released)
    """)
    env = dict(os.environ)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("ok")
