"""Shared helpers for the end-to-end tests of the `memscope` command.

ctest sets MEMSCOPE_CLI (the binary), MEMSCOPE_BUILD_DIR and MEMSCOPE_SOURCE_DIR; run by hand,
the defaults point into ./build. The real trace comes from the corpus (MEMSCOPE_TRACES, else
../shared/traces beside the checkout: tests/support/trace_corpus.py); a test that needs it skips
with the reason when the corpus does not hold it. A file whose tests were all
skipped exits MEMSCOPE_ALL_SKIPPED_EXIT (77), which ctest reports as Skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SOURCE_DIR = Path(os.environ.get("MEMSCOPE_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BUILD_DIR = Path(os.environ.get("MEMSCOPE_BUILD_DIR", SOURCE_DIR / "build"))
CLI = Path(os.environ.get("MEMSCOPE_CLI", BUILD_DIR / "tools" / "memscope" / "memscope"))
# Where tests leave what a person may want to look at (HTML reports, screenshots).
ARTIFACTS = BUILD_DIR / "test-artifacts" / "cli"

MiB = 1 << 20

# The build's Python package (ctest sets PYTHONPATH); children started under `memscope run`
# inherit it.
sys.path.insert(0, str(BUILD_DIR / "python"))
sys.path.insert(0, str(SOURCE_DIR / "tests" / "support"))

import trace_corpus  # noqa: E402  (found through the path above)


def memscope(*args: str | os.PathLike[str], timeout: float = 120, check: bool = False,
             env: dict[str, str] | None = None,
             input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Runs the memscope command; returns the finished process with text stdout and stderr."""
    full_env = dict(os.environ)
    full_env.setdefault("MEMSCOPE_NO_PROGRESS", "1")
    # Under AddressSanitizer, LeakSanitizer's check at a process's exit clones a tracer task
    # that shares the process's memory; a sample that catches it shows a process that is not
    # the program's (an extra process, a child "reaped" by the process, so wait4's figure no
    # longer its own). CI's ASan step failed on it in test_run and test_marks; the library's
    # leaks are checked by its gtests.
    full_env["ASAN_OPTIONS"] = ":".join(
        filter(None, [full_env.get("ASAN_OPTIONS", ""), "detect_leaks=0"]))
    if env:
        full_env.update(env)
    result = subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True,
                            timeout=timeout, env=full_env, input=input)
    if check and result.returncode != 0:
        raise AssertionError(
            f"memscope {' '.join(map(str, args))} exited {result.returncode}\n"
            f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}")
    return result


@pytest.fixture(scope="session")
def real_trace() -> Path:
    """The corpus's small train-step trace (reference numbers in its README); skips without it."""
    return trace_corpus.trace_or_skip()


@pytest.fixture
def artifacts(request: pytest.FixtureRequest) -> Path:
    """A folder under the build tree for this test's files, kept after the run."""
    folder = ARTIFACTS / request.node.name.replace("/", "_").replace("[", "_").replace("]", "")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """With MEMSCOPE_ALL_SKIPPED_EXIT set, a run in which every test was skipped exits with that
    code, so ctest reports the file as skipped, never passed."""
    code = os.environ.get("MEMSCOPE_ALL_SKIPPED_EXIT")
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    # 5: nothing collected, as when a module-level importorskip skips the whole file.
    if code and exitstatus in (0, 5) and reporter is not None:
        if reporter.stats.get("skipped") and not reporter.stats.get("passed"):
            session.exitstatus = int(code)
