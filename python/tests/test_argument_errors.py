"""Wrong argument types and values raise TypeError / ValueError naming the argument.

Before, each of these raised an untyped ``RuntimeError: std::bad_cast``.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

import memscope


@pytest.fixture
def host() -> memscope.Allocator:
    return memscope.Allocator("host", config="")


def _cases(a: memscope.Allocator) -> list[tuple[Callable[[], Any], type[Exception], str]]:
    live = a.alloc(64)
    return [
        (lambda: a.free(-1), ValueError, "address must be between 0 and 2**64 - 1, got -1"),
        (lambda: a.free("abc"), TypeError, "address must be an int, not str"),
        (lambda: a.free(1 << 64), ValueError, "address must be between"),
        (lambda: a.record_stream(live, -1), ValueError, "stream must be between"),
        (lambda: a.alloc(1, stream=-5), ValueError, "stream must be between 0 and 2**64 - 1, got -5"),
        (lambda: a.alloc(1, stream=1.5), TypeError, "stream must be an int, not float"),
        (lambda: a.buffer(1, stream="s"), TypeError, "stream must be an int, not str"),
        (lambda: a.lookup(object()), TypeError, "address must be an int, not object"),
    ]


def test_bad_arguments_name_the_argument(host: memscope.Allocator) -> None:
    for call, error, text in _cases(host):
        with pytest.raises(error, match=text.replace("*", r"\*")):
            call()
    assert host.memory_stats()["num_invalid_frees"] == 0  # nothing reached the allocator


def test_integers_of_other_types_are_accepted(host: memscope.Allocator) -> None:
    np = pytest.importorskip("numpy")
    p = host.alloc(64, stream=np.int32(0))
    host.record_stream(np.uint64(p), np.int64(0))
    host.free(np.uint64(p))
    assert host.memory_allocated() == 0
