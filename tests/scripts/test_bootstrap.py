"""scripts/bootstrap, run against stand-ins for dpkg-query, apt-get and sudo on the PATH (the real
ones would install packages): `bootstrap demo` asks only for what `make demo` needs; run from a
terminal it asks before installing Debian packages, and installs nothing when told no; without
a terminal (CI) it installs as before."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BOOTSTRAP = ROOT / "scripts" / "bootstrap"


@pytest.fixture()
def fake_system(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A PATH where every Debian package is missing and apt-get only writes down its arguments;
    python3 reports every Python package present."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    scripts = {
        "dpkg-query": "exit 1\n",
        "apt-get": f'echo "apt-get $*" >> {log}\n',
        "sudo": '"$@"\n',
        "id": "echo 0\n",
        "python3": f'exec {sys.executable} -c "print()"\n',
    }
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text("#!/bin/bash\n" + body)
        path.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:/usr/bin:/bin", PYTHON=str(bin_dir / "python3"))
    return env, log


def installed(log: Path) -> list[str]:
    if not log.exists():
        return []
    lines = [line for line in log.read_text().splitlines() if " install " in line]
    return lines[0].split()[lines[0].split().index("--no-install-recommends") + 1:] if lines else []


Fake = tuple[dict[str, str], Path]


def test_demo_mode_installs_only_what_the_demo_needs(fake_system: Fake) -> None:
    env, log = fake_system
    result = subprocess.run([BOOTSTRAP, "demo"], env=env, stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    packages = set(installed(log))
    assert {"cmake", "g++", "libfmt-dev", "libcli11-dev", "libjs-chart.js"} <= packages
    # Not for the demo: test, benchmark, browser and MPI packages.
    assert not packages & {"libgtest-dev", "libbenchmark-dev", "chromium", "valgrind",
                           "libopenmpi-dev", "clang-tidy"}, packages


def test_the_default_mode_still_installs_everything(fake_system: Fake) -> None:
    env, log = fake_system
    subprocess.run([BOOTSTRAP], env=env, stdin=subprocess.DEVNULL, check=True,
                   capture_output=True, timeout=60)
    assert {"libgtest-dev", "chromium", "libcli11-dev"} <= set(installed(log))


def run_in_terminal(args: list[str], env: dict[str, str], answer: bytes) -> tuple[int, str]:
    """Runs `args` with a pseudo-terminal as stdin/stdout, answering the first prompt."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(args[0], args, env)
    output = b""
    answered = False
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
        if not answered and b"[Y/n]" in output:
            os.write(fd, answer)
            answered = True
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), output.decode(errors="replace")


@pytest.mark.parametrize(("answer", "code"), [(b"n\n", 1), (b"\n", 0)])
def test_in_a_terminal_it_asks_first(fake_system: tuple[dict[str, str], Path], answer: bytes,
                                     code: int) -> None:
    env, log = fake_system
    exit_code, output = run_in_terminal([str(BOOTSTRAP), "demo"], env, answer)
    assert "install these Debian packages" in output and "libcli11-dev" in output, output
    assert exit_code == code, output
    assert bool(installed(log)) == (code == 0), output


def test_an_unknown_mode_is_refused(fake_system: tuple[dict[str, str], Path]) -> None:
    env, _ = fake_system
    result = subprocess.run([BOOTSTRAP, "everything"], env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2 and "unknown mode 'everything' (use: all, demo)" in result.stderr
