"""Arrays built from a Buffer's array-interface dicts keep its memory alive.

numpy, CuPy, PyTorch and Numba keep the object that carried the interface dict alive, not
the Buffer: before the fix, Buffer.free() or the Buffer's collection returned the memory
under such an array and empty_cache() unmapped it, so the next read crashed the interpreter.
The crash-prone steps run in a child interpreter so that a regression fails the test instead
of killing pytest.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import memscope

MiB = 1 << 20


class Carrier:
    """What a consumer sees: an object with only the interface dict (no Buffer)."""

    def __init__(self, interface: dict[str, object]) -> None:
        self.__array_interface__ = interface


def _run(code: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_interface_dict_carries_a_share_of_the_memory() -> None:
    np = pytest.importorskip("numpy")
    host = memscope.Allocator("host", config="")
    buf = host.buffer(4 * MiB)
    array = np.asarray(Carrier(buf.__array_interface__))
    array[:] = 7
    buf.free()
    assert buf.freed
    # The consumer still holds it: the allocator still counts it, and empty_cache() keeps it.
    assert host.memory_allocated() >= 4 * MiB
    host.empty_cache()
    assert int(array.sum()) == 7 * 4 * MiB
    del array
    # The Buffer lent its address, so its own object keeps the memory too (issue 29.1).
    assert host.memory_allocated() >= 4 * MiB
    del buf
    assert host.memory_allocated() == 0
    assert host.empty_cache() > 0


@pytest.mark.parametrize("how", ["free", "collect"])
def test_reading_after_free_and_empty_cache_does_not_crash(how: str) -> None:
    pytest.importorskip("numpy")
    result = _run(f"""
        import gc
        import numpy as np
        import memscope

        class Carrier:
            def __init__(self, interface):
                self.__array_interface__ = interface

        host = memscope.Allocator("host", config="")
        buf = host.buffer(64 << 20)
        array = np.asarray(Carrier(buf.__array_interface__))
        array[:] = 3
        if "{how}" == "free":
            buf.free()
        else:
            del buf
            gc.collect()
        host.empty_cache()
        print(int(array[::4096].sum()), host.memory_allocated() >= 64 << 20)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(3 * (64 << 20) // 4096), "True"]


# Issue 29.1: consumers that keep the Buffer itself (not the interface dict). torch.frombuffer
# releases its Py_buffer at once and keeps a reference to the Buffer; numpy given an object
# whose __array_interface__ property forwards to the Buffer keeps that object. Before the fix,
# free() returned the memory under them: the next buffer got the same bytes, and after
# empty_cache() a read was a segfault.
_KEEPS_THE_BUFFER = """
    import gc
    import memscope

    class Forwarder:
        def __init__(self, buf):
            self.buf = buf

        @property
        def __array_interface__(self):
            return self.buf.__array_interface__

    def lend(buf, consumer):
        if consumer == "torch.frombuffer":
            import torch
            return torch.frombuffer(buf, dtype=torch.uint8)
        import numpy as np
        return np.asarray(Forwarder(buf))

    host = memscope.Allocator("host", config="")
    buf = host.buffer(64 << 20)
    address = buf.address
    array = lend(buf, "{consumer}")
    array[:] = 3
    buf.free()
    assert buf.freed
    other = host.buffer(64 << 20)          # must not get the lent bytes
    assert other.address != address, "the lent memory was handed out again"
    other.free()
    assert host.memory_allocated() == 64 << 20, host.memory_allocated()
    host.empty_cache()
    print(int(array[::4096].sum()))
    del array, buf
    gc.collect()
    print(host.memory_allocated())
"""


@pytest.mark.parametrize("consumer", ["torch.frombuffer", "numpy-forwarder"])
def test_free_of_a_buffer_a_consumer_keeps_is_deferred(consumer: str) -> None:
    pytest.importorskip("torch" if consumer.startswith("torch") else "numpy")
    result = _run(_KEEPS_THE_BUFFER.replace("{consumer}", consumer))
    assert result.returncode == 0, (result.returncode, result.stderr)
    assert result.stdout.split() == [str(3 * (64 << 20) // 4096), "0"]


def test_free_of_a_never_lent_buffer_is_immediate() -> None:
    host = memscope.Allocator("host", config="")
    buf = host.buffer(MiB)
    _ = buf.address  # the address alone is not a loan
    buf.free()
    assert host.memory_allocated() == 0
    sim = memscope.Allocator("sim:1GiB", config="")
    sbuf = sim.buffer(MiB)
    sbuf.free()  # simulated memory lends nothing: always immediate
    assert sim.memory_allocated() == 0


def test_a_freed_lent_buffer_refuses_every_use() -> None:
    np = pytest.importorskip("numpy")
    host = memscope.Allocator("host", config="")
    buf = host.buffer(MiB)
    view = np.asarray(buf)
    del view
    buf.free()
    assert host.memory_allocated() == MiB  # deferred until the Buffer is collected
    for use in (lambda: buf.address, lambda: memoryview(buf), lambda: buf.size,
                lambda: buf.__array_interface__, buf.free):
        with pytest.raises(memscope.InvalidPointerError):
            use()
    del use, buf  # `use` last held buf.free, a bound method that keeps buf
    assert host.memory_allocated() == 0
