"""memscope.Allocator with expandable_segments:true: reserved memory grows by pages, snapshot
segments are the mapped ranges (is_expandable), empty_cache() unmaps the free whole pages of a
hole between live blocks (the host's resident bytes fall by what it reports), and settings the
backend cannot honour raise ConfigError naming the key."""

from __future__ import annotations

import pytest
from conftest import MiB

import memscope

EXPANDABLE = "expandable_segments:true"


def resident_bytes() -> int:
    """Rss of /proc/self/smaps_rollup: the kernel's page-table walk, exact (VmRSS sums per-CPU
    counters and may be off by several MiB on machines with many CPUs)."""
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Rss:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no Rss line in /proc/self/smaps_rollup")


def test_reserved_grows_by_pages_and_segments_are_mapped_ranges() -> None:
    a = memscope.Allocator("sim:8GiB", config=EXPANDABLE)
    assert a.config == EXPANDABLE
    p = a.alloc(4 * MiB)
    q = a.alloc(5 * MiB + 1)
    assert q == p + 4 * MiB  # packed into one growing range
    assert a.memory_reserved() == 10 * MiB  # 2 MiB pages, no 20 MiB segments
    segments = a.snapshot()["segments"]
    assert len(segments) == 1 and segments[0]["is_expandable"] is True
    assert sum(b["size"] for b in segments[0]["blocks"]) == segments[0]["total_size"]
    a.free(p)
    a.free(q)
    assert a.empty_cache() == 10 * MiB
    assert a.memory_reserved() == 0 and a.snapshot()["segments"] == []


def test_empty_cache_unmaps_a_hole_between_live_blocks_on_the_host() -> None:
    a = memscope.Allocator("host", config=EXPANDABLE)
    left = a.alloc(4 * MiB)
    hole = a.alloc(64 * MiB)
    right = a.alloc(4 * MiB)
    a.free(hole)
    before = resident_bytes()
    released = a.empty_cache()
    after = resident_bytes()
    assert released == 64 * MiB
    assert abs((before - after) - released) <= 1 * MiB
    assert len(a.snapshot()["segments"]) == 2  # the ranges on either side of the hole
    a.free(left)
    a.free(right)


@pytest.mark.parametrize("policy", ["never", "at_limit", "above_peak", "always"])
def test_every_recycling_policy_serves_and_accounts(policy: str) -> None:
    a = memscope.Allocator(
        "sim:1GiB", config=f"{EXPANDABLE},expandable_segments_recycling:{policy}"
    )
    p = a.alloc(600 * MiB, stream=1)
    a.free(p)
    q = a.alloc(600 * MiB, stream=2)  # needs stream 1's cached pages: moved or flushed
    stats = a.memory_stats()
    assert stats["num_ooms"] == 0
    # at_limit maps new pages up to the device's 1 GiB and moves only the 176 MiB beyond it
    assert a.memory_reserved() == (1024 if policy == "at_limit" else 600) * MiB
    a.free(q)


def test_page_size_below_the_granularity_is_a_config_error() -> None:
    with pytest.raises(memscope.ConfigError, match="expandable_segments_page_size"):
        memscope.Allocator("sim:1GiB", config=f"{EXPANDABLE},expandable_segments_page_size:1MiB")
