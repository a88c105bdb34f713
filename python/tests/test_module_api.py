"""The torch.cuda-style module functions on default allocators, and device arguments."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

import memscope

from conftest import MiB, meminfo


class FakeTorchDevice:
    def __init__(self, type: str, index: int | None = None) -> None:  # noqa: A002
        self.type, self.index = type, index


def test_default_device_is_host_without_gpu() -> None:
    if memscope.cuda_is_available():
        assert memscope.current_device() == "cuda:0"
    else:
        assert memscope.current_device() == "host"
        assert memscope.device_count() == 0
    assert memscope.default_allocator() is memscope.default_allocator(None)


def test_device_arguments_resolve_to_one_allocator(sim_spec: str) -> None:
    a = memscope.default_allocator(sim_spec)
    assert memscope.default_allocator(a) is a
    assert memscope.default_allocator(a.backend) is a
    assert memscope.default_allocator("host") is memscope.default_allocator("cpu")
    assert memscope.default_allocator(FakeTorchDevice("cpu")) is memscope.default_allocator("host")
    mine = memscope.Allocator("sim:1GiB", config="")
    assert memscope.default_allocator(mine) is mine  # an Allocator is used as given
    with pytest.raises(TypeError):
        memscope.default_allocator(True)
    with pytest.raises(TypeError):
        memscope.default_allocator(3.5)
    with pytest.raises(memscope.ConfigError):
        memscope.default_allocator(-1)


def test_cuda_device_arguments_without_gpu() -> None:
    if memscope.cuda_is_available():
        pytest.skip("a GPU is present")
    for device in (0, "cuda", "cuda:1", FakeTorchDevice("cuda", 0)):
        with pytest.raises(memscope.BackendUnavailableError):
            memscope.memory_allocated(device)


def test_set_device() -> None:
    before = memscope.current_device()
    try:
        memscope.set_device("sim:2GiB")
        assert memscope.current_device() == "sim:2GiB"
        p = memscope.alloc(MiB)
        assert memscope.memory_allocated("sim:2GiB") == MiB
        memscope.free(p)
    finally:
        memscope._api._current = None
    assert memscope.current_device() == before


def test_every_module_function_matches_the_allocator(sim_spec: str) -> None:
    a = memscope.default_allocator(sim_spec)
    p = memscope.alloc(5 * MiB, sim_spec)
    b = memscope.buffer(3000, sim_spec)
    assert memscope.memory_allocated(sim_spec) == a.memory_allocated() == 5 * MiB + 3072
    assert memscope.memory_reserved(sim_spec) == a.memory_reserved() == 22 * MiB
    assert memscope.memory_stats(sim_spec) == a.memory_stats()
    assert memscope.memory_summary(sim_spec) == a.memory_summary()
    segments = memscope.memory_snapshot(sim_spec)
    assert segments == a.snapshot()["segments"] and len(segments) == 2
    memscope.free(p)  # found without naming the device
    b.free()
    assert memscope.max_memory_allocated(sim_spec) == 5 * MiB + 3072
    assert memscope.max_memory_reserved(sim_spec) == 22 * MiB
    memscope.reset_peak_memory_stats(sim_spec)
    assert memscope.max_memory_allocated(sim_spec) == 0
    memscope.reset_accumulated_memory_stats(sim_spec)
    assert memscope.memory_stats(sim_spec)["allocation.all.allocated"] == 0
    capacity = a.capacity
    assert memscope.mem_get_info(sim_spec) == (capacity - 22 * MiB, capacity)
    assert memscope.device_memory_used(sim_spec) == 22 * MiB
    assert memscope.empty_cache(sim_spec) == 22 * MiB
    assert memscope.device_memory_used(sim_spec) == 0
    with memscope.peak_scope(sim_spec) as scope:
        q = memscope.alloc(MiB, sim_spec)
        memscope.record_stream(q, 0, sim_spec)
        memscope.free(q, sim_spec)
    assert scope.peak.allocated_bytes == MiB
    memscope.set_per_process_memory_fraction(0.5, sim_spec)
    assert a.memory_limit == capacity // 2
    with pytest.raises(memscope.ConfigError):
        memscope.set_per_process_memory_fraction(1.5, sim_spec)
    with pytest.raises(memscope.InvalidPointerError):
        memscope.free(q)
    memscope.free(0)


def test_host_device_matches_proc() -> None:
    info = meminfo()
    free, total = memscope.mem_get_info("host")
    assert total <= info["MemTotal"]  # MemTotal, or a lower cgroup limit
    assert abs(free - meminfo()["MemAvailable"]) < 256 * MiB  # other processes move it
    used = memscope.device_memory_used("host")
    assert abs(used - (total - free)) < 256 * MiB


def test_gpu_process_listing_without_a_gpu(sim_spec: str) -> None:
    assert memscope.gpu_processes("host") == []
    assert "not a GPU" in memscope.list_gpu_processes(sim_spec)
    if not memscope.cuda_is_available():
        text = memscope.list_gpu_processes(0)
        assert text.startswith("cuda:0: ")  # says why it cannot tell


def test_device_specs_have_one_parser(sim_spec: str) -> None:
    """BackendSpec (the C++ parser) is exported, and the module functions read specs with it:
    a malformed CUDA spec is a ConfigError naming it, not a bare int() ValueError."""
    assert memscope.BackendSpec("cuda:1").index == 1
    assert memscope.BackendSpec(sim_spec).type == "sim" and memscope.BackendSpec("host").index is None
    for call in (memscope.gpu_processes, memscope.list_gpu_processes, memscope.device_memory_used):
        with pytest.raises(memscope.ConfigError, match="cuda:x"):
            call("cuda:x")


@pytest.mark.parametrize("name, needs", [("hf", "transformers"), ("torch", "torch")])
def test_integrations_load_on_first_use(name: str, needs: str) -> None:
    """Issue 10.11: the README writes memscope.hf.MemoryMetricsCallback(), which was an
    AttributeError until `import memscope.hf`. Now the attribute imports the module, and
    `import memscope` alone imports neither torch nor transformers."""
    installed = importlib.util.find_spec(needs) is not None
    code = f"""
import sys, memscope
assert not {{"torch", "transformers", "memscope.hf", "memscope.torch"}} & set(sys.modules)
try:
    module = memscope.{name}
except ImportError as e:
    assert not {installed}, e
    assert "pip install {needs}" in str(e), e
else:
    assert {installed} and module is sys.modules["memscope.{name}"]
try:
    memscope.no_such_thing
except AttributeError as e:
    assert "no_such_thing" in str(e)
else:
    raise AssertionError("memscope.no_such_thing exists")
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr


def test_no_gpu_here_respects_an_explicit_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine without a GPU is told apart from one whose driver fails (see memscope.hf)."""
    monkeypatch.setenv("MEMSCOPE_CUDA_DRIVER", "/opt/nvidia/libcuda.so.1")
    assert not memscope._api.no_gpu_here()  # pointed at a driver: its failure is real
    monkeypatch.delenv("MEMSCOPE_CUDA_DRIVER")
    monkeypatch.setattr(os.path, "exists", lambda path: path == "/proc/driver/nvidia")
    assert not memscope._api.no_gpu_here()  # a kernel driver: a GPU that CUDA cannot use
