"""The consistency PyTorch's HTML memory viewer needs from a snapshot, checked in Python.

The viewer (torch/utils/viz/MemoryViz.js, "Allocator State History") starts from the
segments and live blocks of the snapshot and undoes the device's events from the newest back:
undoing an alloc removes its block, undoing a free puts the block back, undoing a
segment_alloc removes the segment, undoing a segment_free puts it back. At every step it draws
each live block inside the segment that holds its address, and it fails (a TypeError in the
page) on a block no segment holds, or on a free_requested whose block is not live. It places
blocks at the segment's address plus the sizes of the blocks before them, not at their
"address" field.

check_placement() walks a snapshot the same way and returns every problem it finds, in words;
an empty list means the viewer can draw every step. It is stricter than the viewer where the
viewer would draw something wrong rather than fail (an alloc undone for a block that is not
live, segments that overlap, a segment_alloc undone for a segment that does not exist).
This is our own code, written from the rules above; nothing of PyTorch's is copied.
"""

from __future__ import annotations

import bisect
from typing import Any

_LIVE = ("active_allocated", "active_pending_free")


class _Segments:
    """Live segments of one device, sorted by address, for containment queries."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.sizes: dict[int, int] = {}

    def add(self, addr: int, size: int) -> str | None:
        i = bisect.bisect_left(self.starts, addr)
        if i < len(self.starts) and self.starts[i] < addr + size:
            return f"segment {addr:#x}+{size} overlaps segment {self.starts[i]:#x}"
        if i > 0 and self.starts[i - 1] + self.sizes[self.starts[i - 1]] > addr:
            return f"segment {addr:#x}+{size} overlaps segment {self.starts[i - 1]:#x}"
        self.starts.insert(i, addr)
        self.sizes[addr] = size
        return None

    def remove(self, addr: int) -> bool:
        i = bisect.bisect_left(self.starts, addr)
        if i == len(self.starts) or self.starts[i] != addr:
            return False
        del self.starts[i]
        del self.sizes[addr]
        return True

    def holding(self, addr: int, size: int = 1) -> int | None:
        """The address of the segment that holds [addr, addr + size), or None."""
        i = bisect.bisect_right(self.starts, addr) - 1
        if i < 0:
            return None
        start = self.starts[i]
        return start if addr + max(size, 1) <= start + self.sizes[start] else None


def check_placement(snapshot: dict[str, Any], limit: int = 20) -> list[str]:
    """Problems that stop PyTorch's viewer from drawing `snapshot` (at most `limit`)."""
    problems: list[str] = []

    def problem(text: str) -> bool:
        problems.append(text)
        return len(problems) >= limit

    traces = snapshot.get("device_traces", [])
    devices = {seg["device"] for seg in snapshot["segments"]}
    devices |= {d for d, t in enumerate(traces) if t}
    for device in sorted(devices):
        if device >= len(traces):
            problems.append(f"device {device} has segments but no device_traces entry")
            continue
        segments = _Segments()
        blocks: dict[int, int] = {}  # live block address -> size
        for i, seg in enumerate(snapshot["segments"]):
            if seg["device"] != device:
                continue
            err = segments.add(seg["address"], seg["total_size"])
            if err and problem(f"device {device}: segments[{i}]: {err}"):
                return problems
            addr = seg["address"]
            for k, b in enumerate(seg["blocks"]):
                if b.get("address", addr) != addr:
                    if problem(f"segments[{i}].blocks[{k}]: address {b['address']:#x}, but the "
                               f"blocks before it end at {addr:#x} (the viewer uses the latter)"):
                        return problems
                if b["state"] in _LIVE:
                    blocks[addr] = b["size"]
                addr += b["size"]
            if addr != seg["address"] + seg["total_size"]:
                if problem(f"segments[{i}]: blocks cover {addr - seg['address']} bytes of "
                           f"{seg['total_size']}"):
                    return problems

        events = traces[device]
        for n in range(len(events) - 1, -1, -1):
            e = events[n]
            where = f"device_traces[{device}][{n}] ({e['action']})"
            action = e["action"]
            err = None
            if action == "alloc":
                if blocks.pop(e["addr"], None) is None:
                    err = f"block {e['addr']:#x} is allocated here but not live after it"
            elif action == "free_completed":
                if e["addr"] in blocks:
                    err = f"block {e['addr']:#x} freed here is still live after it"
                elif segments.holding(e["addr"], e["size"]) is None:
                    err = f"block {e['addr']:#x}+{e['size']} freed here lies in no segment"
                else:
                    blocks[e["addr"]] = e["size"]
            elif action == "free_requested":
                if e["addr"] not in blocks:
                    err = f"block {e['addr']:#x} is not live where it is freed"
            elif action in ("segment_alloc", "segment_map"):
                start = e["addr"]
                if action == "segment_alloc" and not segments.remove(start):
                    err = f"segment {start:#x} reserved here is not there after it"
                elif action == "segment_map":
                    err = "expandable segments are not checked"
                else:
                    inside = [a for a in blocks if start <= a < start + e["size"]]
                    if inside:
                        err = f"segment {start:#x} reserved here holds block {inside[0]:#x}"
            elif action in ("segment_free", "segment_unmap"):
                err = segments.add(e["addr"], e["size"])
            if err and problem(f"{where}: {err}"):
                return problems
    return problems
