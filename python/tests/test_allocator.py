"""memscope.Allocator on the host and simulated backends, checked against the C++ statistics
(memory_stats, snapshot) and, for the host, against /proc."""

from __future__ import annotations

import threading

import pytest

import memscope

from conftest import GiB, MiB, proc_status

TORCH_KEYS = [  # a sample of torch.cuda.memory_stats() keys, spelled exactly
    "allocated_bytes.all.current", "allocated_bytes.all.peak", "allocated_bytes.small_pool.freed",
    "reserved_bytes.large_pool.allocated", "active_bytes.all.current", "active.all.peak",
    "inactive_split_bytes.all.current", "inactive_split.small_pool.current",
    "requested_bytes.all.current", "segment.all.current", "allocation.all.allocated",
    "num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc",
    "num_device_free", "max_split_size", "oversize_allocations.current",
    "oversize_segments.peak",
]


def test_properties(allocator: memscope.Allocator) -> None:
    assert allocator.kind in ("host", "simulated")
    assert allocator.capacity > 0
    assert allocator.memory_limit == allocator.capacity
    assert allocator.config == ""
    assert allocator.backend in repr(allocator)
    assert allocator == allocator and hash(allocator) == hash(allocator)


def test_alloc_free_and_stats(allocator: memscope.Allocator) -> None:
    stats = allocator.memory_stats()
    assert all(k in stats for k in TORCH_KEYS)
    assert list(stats) == sorted(stats)
    p = allocator.alloc(1000)
    q = allocator.alloc(3 * MiB)
    assert p % 512 == 0 and q % 512 == 0
    assert allocator.lookup(p) == {"size": 1024, "requested_size": 1000, "stream": 0}
    assert allocator.memory_allocated() == 1024 + 3 * MiB
    assert allocator.memory_reserved() == 2 * MiB + 20 * MiB  # one small and one large segment
    s = allocator.memory_stats()
    assert s["allocated_bytes.all.current"] == allocator.memory_allocated()
    assert s["allocated_bytes.small_pool.current"] == 1024
    assert s["requested_bytes.all.current"] == 1000 + 3 * MiB
    assert s["allocation.all.current"] == 2 and s["segment.all.current"] == 2
    assert s["num_device_alloc"] == 2
    allocator.free(p)
    allocator.free(q)
    assert allocator.lookup(p) is None
    assert allocator.memory_allocated() == 0
    assert allocator.max_memory_allocated() == 1024 + 3 * MiB
    assert allocator.alloc(0) == 0
    allocator.free(0)  # freeing null is a no-op, as in C


def test_double_free_and_foreign_pointer_raise(allocator: memscope.Allocator) -> None:
    p = allocator.alloc(4096)
    allocator.free(p)
    with pytest.raises(memscope.InvalidPointerError, match="double free"):
        allocator.free(p)
    with pytest.raises(memscope.InvalidPointerError):
        allocator.free(12345)
    assert allocator.memory_stats()["num_invalid_frees"] == 2
    with pytest.raises(memscope.InvalidPointerError):
        allocator.record_stream(p, 7)  # use after free


def test_peaks_and_resets(allocator: memscope.Allocator) -> None:
    p = allocator.alloc(8 * MiB)
    allocator.free(p)
    assert allocator.max_memory_allocated() == 8 * MiB
    reserved = allocator.memory_reserved()
    allocator.reset_peak_memory_stats()
    s = allocator.memory_stats()
    assert allocator.max_memory_allocated() == 0
    assert allocator.max_memory_reserved() == reserved  # peak := current, nothing else
    assert s["allocated_bytes.all.allocated"] == 8 * MiB
    allocator.reset_accumulated_memory_stats()
    s = allocator.memory_stats()
    assert s["allocated_bytes.all.allocated"] == 0 and s["num_device_alloc"] == 0
    assert s["reserved_bytes.all.current"] == reserved


def test_empty_cache_releases_and_counts_one_sync(allocator: memscope.Allocator) -> None:
    keep = allocator.alloc(1 * MiB)
    tmp = allocator.alloc(64 * MiB)
    allocator.free(tmp)
    before = allocator.memory_stats()
    released = allocator.empty_cache()
    after = allocator.memory_stats()
    assert released == 64 * MiB
    assert after["reserved_bytes.all.current"] == before["reserved_bytes.all.current"] - released
    assert after["reserved_bytes.all.peak"] == before["reserved_bytes.all.peak"]
    assert after["num_sync_all_streams"] == before["num_sync_all_streams"] + 1
    assert after["num_device_free"] == before["num_device_free"] + 1
    assert allocator.lookup(keep) is not None
    allocator.free(keep)


def test_snapshot_matches_stats(allocator: memscope.Allocator) -> None:
    ptrs = [allocator.alloc(n) for n in (100, 5000, 700_000, 3 * MiB, 12 * MiB)]
    allocator.free(ptrs[1])
    snap = allocator.snapshot()
    assert snap["backend"] == allocator.backend
    segments = snap["segments"]
    assert sum(s["total_size"] for s in segments) == allocator.memory_reserved()
    live = [b for s in segments for b in s["blocks"] if b["state"] == "active_allocated"]
    assert sum(b["size"] for b in live) == allocator.memory_allocated()
    assert {b["address"] for b in live} == {p for i, p in enumerate(ptrs) if i != 1}
    for s in segments:
        assert sum(b["size"] for b in s["blocks"]) == s["total_size"]
    for i, p in enumerate(ptrs):
        if i != 1:
            allocator.free(p)


def test_summary_mentions_backend_and_numbers(allocator: memscope.Allocator) -> None:
    p = allocator.alloc(3 * MiB)
    text = allocator.memory_summary()
    assert allocator.backend in text and "3.00 MiB" in text
    allocator.free(p)


def test_peak_scopes_nest_and_ignore_reset(sim: memscope.Allocator) -> None:
    base = sim.alloc(10 * MiB)
    with sim.peak_scope() as outer:
        a = sim.alloc(100 * MiB)
        with sim.peak_scope() as inner:
            b = sim.alloc(50 * MiB)
            sim.free(b)
            sim.reset_peak_memory_stats()  # touches no scope
        sim.free(a)
        assert inner.peak.allocated_bytes == 160 * MiB
        assert inner.begin.allocated_bytes == 110 * MiB
        assert not inner.is_open
        c = sim.alloc(200 * MiB)
        sim.free(c)
    assert outer.peak.allocated_bytes == 210 * MiB
    assert outer.peak.as_dict()["requested_bytes"] == 210 * MiB
    assert outer.begin.allocated_bytes == 10 * MiB
    assert sim.max_memory_allocated() == 210 * MiB  # since the reset
    overlapping = sim.peak_scope()
    second = sim.peak_scope()
    p = sim.alloc(30 * MiB)
    overlapping.close()  # closed out of order: the inner one keeps counting
    sim.free(p)
    q = sim.alloc(5 * MiB)
    assert second.peak.allocated_bytes == 40 * MiB
    assert overlapping.peak.allocated_bytes == 40 * MiB
    second.close()
    sim.free(q)
    sim.free(base)


def test_scope_outlives_the_allocator_object() -> None:
    a = memscope.Allocator("sim:1GiB", config="")
    scope = a.peak_scope()
    p = a.alloc(MiB)
    del a  # the scope keeps the C++ allocator alive
    assert scope.peak.allocated_bytes == MiB
    scope.close()
    del p


def test_record_stream_delays_reuse(sim: memscope.Allocator) -> None:
    sim._hold_stream(7)
    p = sim.alloc(4 * MiB, stream=0)
    sim.record_stream(p, 7)
    sim.free(p)
    assert sim.memory_stats()["active_bytes.all.current"] == 4 * MiB  # pending on stream 7
    q = sim.alloc(4 * MiB)
    assert q != p
    sim._complete_stream(7)
    sim.free(q)
    r = sim.alloc(4 * MiB)  # the event has completed: the first block is reusable again
    assert sim.memory_stats()["active_bytes.all.current"] == 4 * MiB
    sim.free(r)

    class TorchLikeStream:
        cuda_stream = 7

    s = sim.alloc(1024, stream=TorchLikeStream())
    assert sim.lookup(s)["stream"] == 7
    sim.free(s)


def test_memory_limit_and_config(sim: memscope.Allocator) -> None:
    sim.memory_limit = 1 * GiB
    with pytest.raises(memscope.OutOfMemoryError):
        sim.alloc(2 * GiB)
    limited = memscope.Allocator("sim:8GiB", config="memory_limit:0.25")
    assert limited.memory_limit == 2 * GiB
    assert limited.config == "memory_limit:0.25"


def test_mem_get_info(allocator: memscope.Allocator) -> None:
    free, total = allocator.mem_get_info()
    assert total == allocator.capacity and 0 < free <= total
    if allocator.kind == "simulated":
        p = allocator.alloc(100 * MiB)
        assert allocator.mem_get_info()[0] == total - allocator.memory_reserved()
        allocator.free(p)


def test_host_allocations_are_resident_and_empty_cache_returns_them() -> None:
    a = memscope.Allocator("host", config="")
    before = proc_status()["VmRSS"]
    p = a.alloc(128 * MiB)
    grown = proc_status()["VmRSS"] - before
    assert abs(grown - 128 * MiB) < 4 * MiB  # the host backend populates what it reserves
    a.free(p)
    assert abs(proc_status()["VmRSS"] - before - 128 * MiB) < 4 * MiB  # cached, still resident
    assert a.empty_cache() == 128 * MiB
    assert abs(proc_status()["VmRSS"] - before) < 4 * MiB


def test_threads_share_an_allocator(sim: memscope.Allocator) -> None:
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for i in range(300):
                p = sim.alloc(512 * (1 + i % 50))
                sim.free(p)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    s = sim.memory_stats()
    assert s["allocation.all.allocated"] == 1200 and s["allocation.all.current"] == 0


_NULL_ADDRESS = """
import memscope
a = memscope.Allocator("{backend}", config="{config}")
keep = [a.alloc(512 * (i + 1)) for i in range(64)]
assert a.lookup(0) is None
for call in (lambda: a.record_stream(0, 7),
             lambda: memscope.record_stream(0, 7, device=a)):
    try:
        call()
    except memscope.InvalidPointerError:
        pass
    else:
        raise AssertionError("record_stream(0) accepted")
empty = a.buffer(0)
assert empty.size == 0 and a.lookup(empty) is None
empty.record_stream(7)
for p in keep:
    a.free(p)
print("ok")
"""


@pytest.mark.parametrize("backend,config", [("host", ""), ("sim:8GiB", ""),
                                            ("host", "expandable_segments:true"),
                                            ("sim:8GiB", "expandable_segments:true")])
def test_address_zero_is_no_allocation(backend: str, config: str) -> None:
    """Issue 29.2: lookup(0), record_stream(0, s) and buffer(0).size read the pointer map's empty
    slot as a block and crashed the interpreter (run in a child so a regression fails)."""
    import subprocess
    import sys

    code = _NULL_ADDRESS.replace("{backend}", backend).replace("{config}", config)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
