"""memscope info: host memory against /proc/meminfo, the cgroup limit against the cgroup files
read here, and NVML / CUDA: usable where their libraries load, else a plain reason (exit 0)."""

from __future__ import annotations

import ctypes
import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from conftest import CLI, MiB, memscope

NO_LIMIT_ABOVE = 1 << 62  # cgroup v1 writes "no limit" as its largest page counter


def meminfo() -> dict[str, int]:
    """/proc/meminfo in bytes."""
    out = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, value = line.partition(":")
        fields = value.split()
        if fields and fields[0].isdigit():
            out[key] = int(fields[0]) * (1024 if fields[1:] == ["kB"] else 1)
    return out


def library_loads(name: str, override: str) -> bool:
    """Whether the driver library loads here (as memscope loads it, honouring its override)."""
    try:
        ctypes.CDLL(os.environ.get(override) or name)
        return True
    except OSError:
        return False


def info_json() -> dict:
    result = memscope("info", "--json", check=True)
    return json.loads(result.stdout)


def size_text(n: int) -> str:
    """A pattern for how memscope prints a size: '23.54 GiB (25276071936 bytes)' (the unit's
    rounding is format_bytes's, tested in C++; the exact count is compared here)."""
    return rf"\d+(\.\d\d)? [KMGTPE]?i?B \({n} bytes\)"


def test_text_shows_the_host_total_of_proc_meminfo() -> None:
    result = memscope("info", check=True)
    total = meminfo()["MemTotal"]
    assert result.stdout.startswith("Host memory")
    assert re.search(rf"^  total +{size_text(total)}$", result.stdout, re.M), result.stdout


def test_json_host_memory_is_exactly_proc_meminfo() -> None:
    data = info_json()
    assert data["format"] == "memscope-info" and data["version"] == 1
    mem = meminfo()
    assert data["host"]["mem_total"] == mem["MemTotal"]
    assert data["host"]["swap_total"] == mem["SwapTotal"]
    assert 0 < data["host"]["mem_available"] <= mem["MemTotal"]


def cgroup_here() -> tuple[int, str, int | None, str | None, Path]:
    """(version, path, limit or None, where the limit is set, its folder) of this process's
    memory cgroup, read independently of memscope: the tightest limit on the way up to the
    mount's root."""
    v1 = v2 = None
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        ident, controllers, path = line.split(":", 2)
        if ident == "0" and controllers == "":
            v2 = path
        if "memory" in controllers.split(","):
            v1 = path
    mounts = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        head, _, tail = line.partition(" - ")
        fstype, _, opts = tail.split()[:3]
        if fstype == "cgroup2" and 2 not in mounts:
            mounts[2] = (head.split()[3], head.split()[4])
        if fstype == "cgroup" and "memory" in opts.split(",") and 1 not in mounts:
            mounts[1] = (head.split()[3], head.split()[4])
    if v1 is not None and 1 in mounts:
        version, path, limit_name = 1, v1, "memory.limit_in_bytes"
    else:
        assert v2 is not None and 2 in mounts, "no memory cgroup here"
        version, path, limit_name = 2, v2, "memory.max"
    root, mountpoint = mounts[version]
    below = path[len(root):] if root != "/" and path.startswith(root) else path
    parts = [p for p in below.split("/") if p]
    limit, at = None, None
    for depth in range(len(parts), -1, -1):
        file = Path(mountpoint, *parts[:depth], limit_name)
        if not file.exists():
            continue
        text = file.read_text().strip()
        value = None if text == "max" or int(text) >= NO_LIMIT_ABOVE else int(text)
        if value is not None and (limit is None or value < limit):
            cgroup_path = "/".join(path.split("/")[: len(path.split("/")) - (len(parts) - depth)])
            limit, at = value, cgroup_path or "/"
    return version, path, limit, at, Path(mountpoint, *parts)


def test_cgroup_limit_matches_the_cgroup_files() -> None:
    data = info_json()["cgroup"]
    version, path, limit, at, _ = cgroup_here()
    assert data["version"] == version
    assert data["path"] == path
    assert data["limit"] == limit
    assert data["limit_at"] == at
    assert data["current"] is not None and data["current"] > 0
    text = memscope("info", check=True).stdout
    assert f"cgroup v{version} ({path})" in text
    limit_line = re.search(r"^  limit +(.*)$", text, re.M)
    assert limit_line is not None
    if limit is None:
        assert limit_line.group(1) == "none"
    else:
        assert re.fullmatch(size_text(limit) + f", set at {re.escape(at)}", limit_line.group(1))


def test_nvml_and_cuda_say_whether_they_are_usable_and_why_not() -> None:
    data = info_json()
    text = memscope("info", check=True).stdout
    for key, name, library, override in [("nvml", "NVML", "libnvidia-ml.so.1",
                                          "MEMSCOPE_NVML_LIBRARY"),
                                         ("cuda", "CUDA", "libcuda.so.1", "MEMSCOPE_CUDA_DRIVER")]:
        line = re.search(rf"^  {name} +(.*)$", text, re.M)
        assert line is not None, text
        if library_loads(library, override):
            continue  # a GPU machine: checked below
        assert data[key]["available"] is False
        assert library in data[key]["reason"], data[key]["reason"]
        assert line.group(1) == "not usable: " + data[key]["reason"]
    if not data["nvml"]["available"]:
        assert data["gpus"] == []
        assert "not listed: NVML is not usable" in text


def test_gpus_as_nvml_lists_them() -> None:
    data = info_json()
    if not data["nvml"]["available"]:
        pytest.skip("NVML is not usable here: " + data["nvml"]["reason"])
    assert data["nvml"]["driver_version"]
    assert data["gpus"], "NVML is usable but lists no GPU"
    for gpu in data["gpus"]:
        assert gpu["error"] is None, gpu
        assert gpu["name"] and gpu["uuid"].startswith(("GPU-", "MIG-"))
        assert gpu["total"] > 0 and 0 <= gpu["used"] <= gpu["total"]
        for process in gpu["processes"]:
            assert process["pid"] > 0


def test_an_unknown_option_is_a_usage_error() -> None:
    result = memscope("info", "--bogus")
    assert result.returncode == 2
    assert "--bogus" in result.stderr


def test_help_documents_json() -> None:
    result = memscope("info", "--help")
    assert result.returncode == 0
    assert "--json" in result.stdout


def test_a_limit_set_above_the_process_cgroup_is_found(tmp_path: Path) -> None:
    """Where this process may make cgroups (root in a container), run memscope info in a new
    cgroup inside a new one with a tighter limit: the limit above applies and is reported."""
    version, own_path, _, _, own_dir = cgroup_here()
    limit_name = "memory.limit_in_bytes" if version == 1 else "memory.max"
    outer = own_dir / f"memscope-info-test-{os.getpid()}"
    inner = outer / "inner"
    made = []
    try:
        for folder, limit in ((outer, 768 * MiB), (inner, 2048 * MiB)):
            folder.mkdir()
            made.append(folder)
            (folder / limit_name).write_text(str(limit))
    except OSError as e:
        for folder in reversed(made):
            folder.rmdir()
        pytest.skip(f"cannot make a memory cgroup with a limit here: {e}")
    try:
        # The shell moves itself into the inner cgroup, then becomes memscope info.
        script = (f"echo $$ > {shlex.quote(str(inner / 'cgroup.procs'))} && "
                  f"exec {shlex.quote(str(CLI))} info --json")
        result = subprocess.run(["sh", "-c", script], capture_output=True, text=True,
                                timeout=60)
        if result.returncode != 0 and "cgroup.procs" in result.stderr:
            pytest.skip("cannot move a process into a new cgroup here: " + result.stderr)
        assert result.returncode == 0, result.stderr
        data = json.loads(result.stdout)["cgroup"]
        own_path = own_path.rstrip("/")
        assert data["path"] == f"{own_path}/{outer.name}/inner"
        assert data["limit"] == 768 * MiB
        assert data["limit_at"] == f"{own_path}/{outer.name}"
    finally:
        inner.rmdir()
        outer.rmdir()
