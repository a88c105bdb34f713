"""fork() while another thread is inside memscope: the child must not inherit a held lock.

The default-allocator registry builds allocators with the GIL released, so a thread can hold
its lock while the main thread forks; before the registry had fork handlers, a child forked
at that moment hung forever on its first default_allocator() call.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import memscope
from memscope import _memscope


def test_children_of_a_busy_registry_do_not_hang() -> None:
    stop = threading.Event()

    def build_default_allocators() -> None:
        n = 0
        while not stop.is_set():  # 2,000 new allocators, then lookups of them (both lock)
            n += 1
            _memscope._default_allocator(f"sim:{n % 2000 + 4096}MiB")

    worker = threading.Thread(target=build_default_allocators)
    worker.start()
    failures: list[str] = []
    try:
        for i in range(150):
            pid = os.fork()
            if pid == 0:  # the child: its first registry call must not hang
                signal.alarm(10)
                code = 0
                try:
                    memscope.memory_allocated("sim:1GiB")
                    p = memscope.default_allocator("sim:1GiB").alloc(1 << 20)
                    memscope.default_allocator("sim:1GiB").free(p)
                except BaseException:
                    code = 3
                os._exit(code)
            deadline = time.monotonic() + 30
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                if time.monotonic() > deadline:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    status = -1
                    break
                time.sleep(0.001)
            if status != 0:
                failures.append(f"fork {i}: status {status}")
    finally:
        stop.set()
        worker.join()
    assert not failures, failures[:5]
