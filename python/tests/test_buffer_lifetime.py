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
