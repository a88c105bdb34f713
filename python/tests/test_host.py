"""memscope.host against /proc/self/status, and exact nested RSS peak windows."""

from __future__ import annotations

import numpy as np
import pytest

import memscope
from memscope import host

from conftest import MiB, proc_status


def touch(nbytes: int) -> np.ndarray:
    return np.ones(nbytes, dtype=np.uint8)  # every page written: resident


def test_readings_match_proc() -> None:
    m = host.memory()
    status = proc_status()
    assert abs(m["rss"] - status["VmRSS"]) < 2 * MiB
    assert m["rss"] == m["rss_anon"] + m["rss_file"] + m["rss_shmem"]
    assert abs(host.rss() - proc_status()["VmRSS"]) < 2 * MiB
    assert host.peak_rss() >= host.rss()
    assert abs(host.peak_rss() - proc_status()["VmHWM"]) < 2 * MiB


def test_other_process_by_pid() -> None:
    import os

    parent = os.getppid()
    assert host.rss(parent) > 0
    with pytest.raises(memscope.Error):
        host.memory(2**22 + 12345)  # no such process (pid_max is at most 2^22)


def test_nested_peak_windows_are_exact() -> None:
    with host.peak_window() as outer:
        big = touch(256 * MiB)
        del big
        with host.peak_window() as inner:
            small = touch(64 * MiB)
            del small
        inner_reading = inner.read()
    outer_reading = outer.read()
    assert abs(inner_reading["peak"] - inner.begin - 64 * MiB) < 4 * MiB
    assert abs(outer_reading["peak"] - outer.begin - 256 * MiB) < 4 * MiB
    assert not inner.is_open and not outer.is_open


def test_reset_peak_does_not_disturb_windows() -> None:
    w = host.peak_window()
    spike = touch(128 * MiB)
    del spike
    host.reset_peak()
    assert host.peak_rss() < w.read()["peak"]
    assert abs(w.close()["peak"] - w.begin - 128 * MiB) < 4 * MiB


def test_mode_is_reported() -> None:
    assert host.mode() in ("kernel-hwm",) or host.mode().startswith("sampling")
    forced = memscope.host.HostProbe(force_sampling=True, sampling_interval=0.001)
    assert forced.mode == "sampling 1ms" and forced.fallback_reason


def test_process_peak_survives_peak_window_resets() -> None:
    probe = host.probe()
    if probe.mode != "kernel-hwm":
        pytest.skip(f"kernel-hwm mode unavailable: {probe.fallback_reason}")
    before = host.rss()
    with host.peak_window():
        transient = touch(256 * MiB)
        del transient
    transient_peak = before + 256 * MiB
    with host.peak_window():  # resets VmHWM
        assert host.peak_rss() < transient_peak - 128 * MiB
        assert memscope.process_peak_rss() >= transient_peak - probe.peak_bound - 8 * MiB


def test_peak_bound_is_stated() -> None:
    assert host.probe().peak_bound > 0
