"""Progress of long work: shown on stderr when it is a terminal (a pseudo-terminal here), rewritten
in place; silent when stderr is piped, and when MEMSCOPE_NO_PROGRESS is set."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from pathlib import Path

from conftest import CLI, memscope


def run_on_a_terminal(*args: str, env_extra: dict[str, str] | None = None,
                      timeout: float = 120) -> tuple[int, str, str]:
    """Runs memscope with stderr on a pseudo-terminal; returns (code, stdout, terminal text)."""
    env = {k: v for k, v in os.environ.items() if k != "MEMSCOPE_NO_PROGRESS"}
    env.update(env_extra or {})
    leader, follower = pty.openpty()
    proc = subprocess.Popen([str(CLI), *args], stdout=subprocess.PIPE, stderr=follower,
                            stdin=subprocess.DEVNULL, env=env)
    os.close(follower)
    seen = bytearray()
    while True:
        ready, _, _ = select.select([leader], [], [], timeout)
        if not ready:
            proc.kill()
            raise AssertionError(f"no output for {timeout} s; so far: {seen!r}")
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: every writer has closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    out = proc.stdout.read().decode() if proc.stdout else ""
    return proc.wait(timeout=timeout), out, seen.decode(errors="replace")


def test_replay_shows_its_phases_on_a_terminal(real_trace: Path) -> None:
    code, out, terminal = run_on_a_terminal("replay", str(real_trace), "--fit")
    assert code == 0, terminal
    assert "smallest device" in out
    assert "memscope replay: reading" in terminal, terminal
    assert "\r\x1b[K" in terminal  # rewritten in place, and cleared at the end
    assert terminal.endswith("\r\x1b[K"), repr(terminal[-80:])


def test_replay_is_silent_when_piped_or_turned_off(real_trace: Path) -> None:
    piped = memscope("replay", real_trace, "--fit", env={"MEMSCOPE_NO_PROGRESS": ""})
    assert piped.returncode == 0
    assert piped.stderr == ""
    code, _, terminal = run_on_a_terminal("replay", str(real_trace),
                                          env_extra={"MEMSCOPE_NO_PROGRESS": "1"})
    assert code == 0
    assert terminal == ""


def test_a_long_run_shows_a_status_line_on_a_terminal() -> None:
    code, out, terminal = run_on_a_terminal(
        "run", "--interval", "50", "--", sys.executable, "-c", "import time; time.sleep(3)")
    assert code == 0, terminal
    assert "memscope run" in terminal and "\r\x1b[K" in terminal, repr(terminal)
    assert "Processes" in out  # the summary goes to stdout, not the terminal's status line
