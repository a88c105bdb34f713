#!/usr/bin/env python3
"""MB/s of Python's pickle.loads on one file, for memscope_read_speed to print beside its own
figures: python3 pickle_loads_speed.py FILE [SECONDS]. Prints 'median | best' (a table's cells)."""
import pickle
import sys
import time


def main():
    path = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
    with open(path, 'rb') as f:
        data = f.read()
    rates = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(rates) < 5:
        start = time.perf_counter()
        pickle.loads(data)
        rates.append(len(data) / 1e6 / (time.perf_counter() - start))
    rates.sort()
    print(f'{rates[len(rates) // 2]:.0f} | {rates[-1]:.0f}')


if __name__ == '__main__':
    main()
