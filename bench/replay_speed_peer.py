#!/usr/bin/env python3
"""The peer of memscope_replay_speed: what replaying a trace costs in plain Python today.

Reading: pickle.Unpickler with find_class refusing every global (the safe way to open a snapshot
from elsewhere). Replaying: one loop over the device's events keeping a dict of live
address -> size, the live bytes and their peak (no allocator at all: a lower bound on any Python
replay). Prints key=value lines: events, read_s, replay_s, peak, checksum.

  replay_speed_peer.py --file SNAPSHOT.pickle [--repeat N]
  replay_speed_peer.py --synthetic N --seed S   (the same events memscope_replay_speed makes)
"""
from __future__ import annotations

import argparse
import io
import pickle
import time

MASK = (1 << 64) - 1
GIB = 1 << 30
MAX_USAGE = 16000 << 20


class RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"global '{module}.{name}' is forbidden")


def load(data: bytes):
    return RestrictedUnpickler(io.BytesIO(data)).load()


def replay(events) -> int:
    live = {}
    now = peak = 0
    for e in events:
        action = e["action"]
        if action == "alloc":
            live[e["addr"]] = e["size"]
            now += e["size"]
            if now > peak:
                peak = now
        elif action == "free_completed":
            size = live.pop(e["addr"], None)
            if size is not None:
                now -= size
    return peak


def splitmix(seed: int):
    state = seed
    while True:
        state = (state + 0x9E3779B97F4A7C15) & MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        yield z ^ (z >> 31)


def synthetic(n: int, seed: int):
    """RMM's random-allocations pattern, event for event as bench/replay_speed.cpp makes it."""
    rng = splitmix(seed)
    events, live, free_addresses = [], [], []
    next_address, usage, checksum = 1 << 40, 0, 0
    for i in range(n):
        size = 1 + next(rng) % GIB
        alloc = True
        if live:
            alloc = next(rng) % 100 < 73 and usage + size < MAX_USAGE
        if alloc:
            if free_addresses:
                addr = free_addresses.pop()
            else:
                addr, next_address = next_address, next_address + GIB
            live.append((addr, size))
            usage += size
            event = {"action": "alloc", "addr": addr, "size": size, "stream": 0, "time_us": i}
        else:
            k = next(rng) % len(live)
            addr, size = live[k]
            live[k] = live[-1]
            live.pop()
            usage -= size
            free_addresses.append(addr)
            event = {"action": "free_completed", "addr": addr, "size": size, "stream": 0,
                     "time_us": i}
        checksum = (checksum * 31 + addr + size * 7 + (1 if alloc else 0)) & MASK
        events.append(event)
    return {"segments": [], "device_traces": [events]}, checksum


def timed(function, repeat: int):
    samples, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        samples.append(time.perf_counter() - start)
    samples.sort()
    return samples[len(samples) // 2], result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--file")
    parser.add_argument("--synthetic", type=int)
    parser.add_argument("--seed", type=int, default=20261203)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    if args.file:
        with open(args.file, "rb") as f:
            data = f.read()
    else:
        snapshot, checksum = synthetic(args.synthetic, args.seed)
        data = pickle.dumps(snapshot, protocol=4)
        del snapshot
        print(f"checksum={checksum}")
    read_s, snapshot = timed(lambda: load(data), args.repeat)
    events = snapshot["device_traces"][0]
    replay_s, peak = timed(lambda: replay(events), args.repeat)
    print(f"events={len(events)}")
    print(f"read_s={read_s}")
    print(f"replay_s={replay_s}")
    print(f"peak={peak}")


if __name__ == "__main__":
    main()
