#!/usr/bin/env python3
"""Python writing the snapshot in FILE back out, for memscope_write_speed to print beside its own
figures: python3 write_speed_peer.py FILE [SECONDS]. Prints the median milliseconds of one
pickle.dumps(d, protocol=4) and of one json.dumps(d), d being the unpickled snapshot."""
import json
import pickle
import sys
import time


def median_ms(seconds, once):
    times = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 3:
        start = time.perf_counter()
        once()
        times.append((time.perf_counter() - start) * 1e3)
    times.sort()
    return times[len(times) // 2]


def main():
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
    with open(sys.argv[1], 'rb') as f:
        data = pickle.load(f)
    print(f'{median_ms(seconds, lambda: pickle.dumps(data, protocol=4)):.1f} '
          f'{median_ms(seconds, lambda: json.dumps(data)):.1f}')


if __name__ == '__main__':
    main()
