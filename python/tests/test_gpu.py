"""memscope's Python API on a real CUDA device (skipped without one; run by scripts/gpu-check
where a GPU is present). No PyTorch needed: see test_torch_hooks.py for that integration."""

from __future__ import annotations

import pytest

import memscope

from conftest import GiB, MiB

pytestmark = pytest.mark.gpu


def test_device_allocator_basics() -> None:
    a = memscope.Allocator("cuda:0", config="")
    assert a.kind == "device" and a.backend == "cuda:0"
    free, total = a.mem_get_info()
    assert 0 < free <= total == a.capacity
    p = a.alloc(3 * MiB)
    assert a.memory_allocated() == 3 * MiB and a.memory_stats()["num_device_alloc"] == 1
    a.free(p)
    with pytest.raises(memscope.InvalidPointerError):
        a.free(p)
    assert a.empty_cache() == 20 * MiB


def test_device_buffer_exposes_cuda_array_interface_only() -> None:
    a = memscope.Allocator("cuda:0", config="")
    buf = a.buffer(MiB)
    iface = buf.__cuda_array_interface__
    assert iface["data"] == (buf.address, False) and iface["shape"] == (MiB,)
    assert iface["version"] == 3 and iface["typestr"] == "|u1"
    assert not hasattr(buf, "__array_interface__")
    with pytest.raises(BufferError, match="device memory"):
        memoryview(buf)
    buf.free()


def test_free_of_a_device_buffer_torch_keeps_is_deferred() -> None:
    """Issue 29.1: torch.as_tensor keeps the Buffer (it read __cuda_array_interface__), so
    free() ends the Buffer but keeps the memory until the Buffer is collected."""
    torch = pytest.importorskip("torch")
    import gc

    a = memscope.Allocator("cuda:0", config="")
    buf = a.buffer(MiB)
    t = torch.as_tensor(buf, device="cuda")
    t.fill_(5)
    buf.free()
    assert buf.freed and a.memory_allocated() == MiB
    a.empty_cache()
    assert int(t.sum().item()) == 5 * MiB
    del t, buf
    gc.collect()
    assert a.memory_allocated() == 0


def test_default_device_is_the_gpu() -> None:
    assert memscope.current_device() == "cuda:0"
    assert memscope.default_allocator() is memscope.default_allocator(0)
    assert memscope.default_allocator("cuda") is memscope.default_allocator("cuda:0")


def test_oom_on_the_device_keeps_the_allocator_usable() -> None:
    a = memscope.Allocator("cuda:0", config="")
    kept = a.alloc(64 * MiB)
    with pytest.raises(memscope.OutOfMemoryError) as info:
        a.alloc(a.capacity + GiB)
    assert info.value.capacity == a.capacity
    a.free(a.alloc(MiB))
    a.free(kept)


def test_empty_cache_is_visible_to_the_driver() -> None:
    """The scenario users know from torch.cuda.empty_cache(), checked against NVML."""
    a = memscope.Allocator("cuda:0", config="")
    big = a.alloc(1536 * MiB)
    a.free(big)
    small = a.alloc(MiB)
    used_before = memscope.device_memory_used(0)
    released = a.empty_cache()
    used_after = memscope.device_memory_used(0)
    assert released >= 1536 * MiB
    assert abs((used_before - used_after) - released) <= 2 * MiB, (used_before, used_after)
    a.free(small)


def test_gpu_processes_and_listing() -> None:
    a = memscope.default_allocator(0)
    p = a.alloc(MiB)  # makes sure this process has a context on the device
    procs = memscope.gpu_processes(0)
    assert isinstance(procs, list)
    assert memscope.list_gpu_processes(0).startswith("GPU:0")
    a.free(p)


def test_tracker_gpu_stages_exact_on_the_device() -> None:
    t = memscope.Tracker()  # no torch loaded: "gpu" is memscope's allocator on cuda:0
    gpu = {s["label"]: s for s in t.sources()}["gpu"]
    assert gpu["available"] and gpu["mode"] == "peak-scope"
    with t.stage("train"):
        keep = memscope.alloc(100 * MiB, 0)
        with t.stage("eval"):
            tmp = memscope.alloc(50 * MiB, 0)
            memscope.free(tmp)
    m = t.metrics
    assert m["train_mem_gpu_alloc_delta"] == 100 * MiB
    assert m["train_mem_gpu_peaked_delta"] == 50 * MiB
    assert m["eval_mem_gpu_alloc_delta"] == 0 and m["eval_mem_gpu_peaked_delta"] == 50 * MiB
    memscope.free(keep)
