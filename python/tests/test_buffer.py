"""memscope.Buffer: zero-copy views, writes land, safe frees, and refusals."""

from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest

import memscope

from conftest import MiB


@pytest.fixture
def host() -> memscope.Allocator:
    return memscope.Allocator("host", config="")


def test_numpy_sees_the_memory_and_writes_land(host: memscope.Allocator) -> None:
    buf = host.buffer(MiB)
    assert buf.kind == "host" and buf.device == "host" and len(buf) == MiB
    assert buf.allocator is host
    view = np.asarray(buf)
    assert view.dtype == np.uint8 and view.shape == (MiB,)
    assert view.ctypes.data == buf.address  # no copy
    view[:] = 0
    view[10:20] = np.arange(10, dtype=np.uint8)
    assert ctypes.string_at(buf.address + 10, 10) == bytes(range(10))
    ctypes.memset(buf.address, 0xAB, 4)  # and writes through the address show in the view
    assert list(view[:4]) == [0xAB] * 4
    mv = memoryview(buf)
    assert mv.nbytes == MiB and not mv.readonly and mv.format == "B"
    mv[5] = 42
    assert view[5] == 42
    del view, mv
    buf.free()


def test_array_interface(host: memscope.Allocator) -> None:
    buf = host.buffer(4096)
    iface = buf.__array_interface__
    assert iface["data"] == (buf.address, False)
    assert iface["shape"] == (4096,) and iface["typestr"] == "|u1" and iface["version"] == 3
    as_u32 = np.frombuffer(buf, dtype=np.uint32)
    assert as_u32.shape == (1024,)
    assert not hasattr(buf, "__cuda_array_interface__")
    del as_u32
    buf.free()


def test_free_twice_is_an_error_not_a_crash(host: memscope.Allocator) -> None:
    buf = host.buffer(1000)
    buf.free()
    assert buf.freed
    with pytest.raises(memscope.InvalidPointerError):
        buf.free()
    assert host.memory_allocated() == 0


def test_use_after_free_is_refused(host: memscope.Allocator) -> None:
    buf = host.buffer(1000)
    buf.free()
    with pytest.raises(memscope.InvalidPointerError):
        _ = buf.address
    with pytest.raises(memscope.InvalidPointerError):
        memoryview(buf)
    with pytest.raises(memscope.InvalidPointerError):
        np.asarray(buf)
    with pytest.raises(memscope.InvalidPointerError):
        _ = buf.__array_interface__
    with pytest.raises(memscope.InvalidPointerError):
        len(buf)
    with pytest.raises(memscope.InvalidPointerError):
        buf.record_stream(0)
    assert "freed" in repr(buf)


def test_free_while_viewed_is_refused(host: memscope.Allocator) -> None:
    buf = host.buffer(MiB)
    view = np.asarray(buf)
    with pytest.raises(BufferError):
        buf.free()
    view[0] = 1  # still valid memory
    del view
    gc.collect()
    buf.free()


def test_context_manager_and_collection_free(host: memscope.Allocator) -> None:
    with host.buffer(2 * MiB) as buf:
        assert host.memory_allocated() == 2 * MiB
    assert buf.freed and host.memory_allocated() == 0
    buf2 = host.buffer(MiB)
    del buf2
    gc.collect()
    assert host.memory_allocated() == 0


def test_raw_free_of_a_buffer_address_is_refused(host: memscope.Allocator) -> None:
    buf = host.buffer(4096)
    with pytest.raises(memscope.InvalidPointerError, match="Buffer"):
        host.free(buf.address)
    with pytest.raises(TypeError):
        host.free(buf)
    assert host.lookup(buf) is not None  # a Buffer works where an address is expected
    buf.free()


def test_buffer_outlives_its_allocator_object() -> None:
    a = memscope.Allocator("host", config="")
    buf = a.buffer(4096)
    del a
    gc.collect()
    np.asarray(buf)[:] = 3
    assert buf.allocator.memory_allocated() == 4096
    buf.free()


def test_simulated_memory_refuses_views() -> None:
    sim = memscope.Allocator("sim:1GiB", config="")
    buf = sim.buffer(MiB)
    assert buf.kind == "simulated" and buf.address >= 1 << 40
    assert buf.size == MiB
    with pytest.raises(BufferError, match="simulated"):
        memoryview(buf)
    with pytest.raises((BufferError, ValueError, TypeError)):
        np.frombuffer(buf, dtype=np.uint8)
    assert not hasattr(buf, "__array_interface__")
    assert not hasattr(buf, "__cuda_array_interface__")
    buf.free()


def test_zero_size_buffer(host: memscope.Allocator) -> None:
    buf = host.buffer(0)
    assert len(buf) == 0 and np.asarray(buf).size == 0
    buf.free()
    assert host.memory_stats()["num_invalid_frees"] == 0


def test_module_level_buffer_uses_the_default_allocator() -> None:
    before = memscope.memory_allocated("host")
    with memscope.buffer(1 << 16, "host") as buf:
        assert memscope.memory_allocated("host") == before + (1 << 16)
        assert buf.allocator is memscope.default_allocator("host")
