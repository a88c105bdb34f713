"""The pytest plugin (memscope.pytest_plugin): marked tests measured on memscope's simulated
device, where the figures are exact, fail above their limits and pass within them. Runs pytest in
a subprocess (pytester): about 2 s."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import memscope

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def _this_memscope(monkeypatch: pytest.MonkeyPatch) -> None:
    """The child pytest imports the memscope under test, wherever the session found it (a
    relative PYTHONPATH would not survive pytester's change of folder)."""
    here = str(Path(memscope.__file__).resolve().parents[1])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [here, os.environ.get(
        "PYTHONPATH", "")])))

TESTS = '''
import pytest
import memscope

MiB = 1 << 20
kept = []

@pytest.mark.memscope(peak="64MiB", growth=0, device="sim:1GiB")
def test_within():
    p = memscope.alloc(48 * MiB, device="sim:1GiB")
    memscope.free(p, device="sim:1GiB")

@pytest.mark.memscope(peak="64MiB", device="sim:1GiB")
def test_peak_above():
    ps = [memscope.alloc(40 * MiB, device="sim:1GiB") for _ in range(2)]
    memscope.reset_peak_memory_stats("sim:1GiB")  # cannot hide the test's peak
    for p in ps:
        memscope.free(p, device="sim:1GiB")

@pytest.mark.memscope(growth=0, device="sim:1GiB")
def test_leaks():
    kept.append(memscope.alloc(3 * MiB, device="sim:1GiB"))

@pytest.mark.memscope(growth="4MiB")
def test_device_from_the_option():
    kept.append(memscope.alloc(3 * MiB, device="sim:1GiB"))

def test_unmarked():
    kept.append(memscope.alloc(MiB, device="sim:1GiB"))
'''


def test_limits_fail_and_pass(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_contract=TESTS)
    result = pytester.runpytest_subprocess("-p", "memscope.pytest_plugin", "--memscope",
                                           "--memscope-device", "sim:1GiB", "-q")
    result.assert_outcomes(passed=3, failed=2)
    out = result.stdout.str()
    assert "memscope: peak 80.00 MiB is above the limit 64.00 MiB" in out
    assert "memscope: the test left 3.00 MiB allocated on sim:1GiB, more than growth=0 B" in out
    result.stdout.fnmatch_lines([
        "*memscope: memory of the marked tests*",
        "test_contract.py::test_within *peak*48.00 MiB  growth*0 B  on sim:1GiB  ok",
        "test_contract.py::test_peak_above *peak*80.00 MiB*FAILED",
        "test_contract.py::test_leaks *peak*3.00 MiB  growth*3.00 MiB  on sim:1GiB  FAILED",
        "test_contract.py::test_device_from_the_option *growth*3.00 MiB  on sim:1GiB  ok",
    ])


def test_without_the_option_nothing_is_checked(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_contract=TESTS)
    result = pytester.runpytest_subprocess("-p", "memscope.pytest_plugin", "-q")
    result.assert_outcomes(passed=5)
    assert "memscope: memory" not in result.stdout.str()


def test_a_bad_limit_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bad='''
import pytest

@pytest.mark.memscope(peak="lots")
def test_x():
    pass
''')
    result = pytester.runpytest_subprocess("-p", "memscope.pytest_plugin", "--memscope")
    assert result.ret != 0
    assert "lots" in result.stdout.str() + result.stderr.str()
