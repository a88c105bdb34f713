"""memscope must load beside libraries that need glibc's static TLS surplus, in either order.

The first GPU run (docs/gpu.md) found `import memscope; import torch` and the reverse both
failing with "cannot allocate memory in static TLS block": one `initial-exec` thread_local in the
extension flagged the whole module STATIC_TLS, so its 1.5 KiB TLS block took most of the small
surplus glibc keeps for libraries loaded later (torch's libgomp is one). A library of our own
with 1 KiB of initial-exec TLS stands in for libgomp here, on any machine; torch itself is tried
too where it is installed.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import memscope

PT_DYNAMIC = 2
PT_TLS = 7
DT_NULL = 0
DT_FLAGS = 30
DF_STATIC_TLS = 0x10

# Small: a few words (the trace tag, the fork guard's depth, a pointer to the precaptured
# Python frames). Anything near the surplus (glibc keeps about 1.6 KiB, shared by every library
# loaded later) breaks other libraries again.
MAX_TLS_BYTES = 256

TLS_LIBRARY = r"""
__thread char memscope_tls_probe_block[1024] __attribute__((tls_model("initial-exec")));
int memscope_tls_probe(void) { memscope_tls_probe_block[0] = 1; return memscope_tls_probe_block[0]; }
"""


def extension_path() -> Path:
    return Path(memscope._memscope.__file__)


def elf_tls_facts(path: Path) -> tuple[int, bool]:
    """(size of the PT_TLS segment in memory, whether DT_FLAGS has DF_STATIC_TLS)."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, "a 64-bit little-endian ELF"
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    tls_size = 0
    static_tls = False
    for i in range(phnum):
        p_type, _flags, p_offset, _vaddr, _paddr, p_filesz, p_memsz, _align = struct.unpack_from(
            "<IIQQQQQQ", data, phoff + i * phentsize)
        if p_type == PT_TLS:
            tls_size = p_memsz
        elif p_type == PT_DYNAMIC:
            for offset in range(p_offset, p_offset + p_filesz, 16):
                tag, value = struct.unpack_from("<qQ", data, offset)
                if tag == DT_NULL:
                    break
                if tag == DT_FLAGS and value & DF_STATIC_TLS:
                    static_tls = True
    return tls_size, static_tls


def test_the_extension_is_not_flagged_static_tls() -> None:
    tls_size, static_tls = elf_tls_facts(extension_path())
    assert not static_tls, (
        f"{extension_path().name} has DF_STATIC_TLS: an initial-exec/local-exec thread_local was "
        "linked in; its TLS block then competes for glibc's static surplus")
    assert tls_size <= MAX_TLS_BYTES, (
        f"{extension_path().name}: PT_TLS is {tls_size} bytes; keep thread-local state small or "
        "behind a pointer")


@pytest.fixture(scope="module")
def tls_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        pytest.skip("no C compiler to build the initial-exec TLS library")
    folder = tmp_path_factory.mktemp("tls")
    source = folder / "tls_probe.c"
    source.write_text(TLS_LIBRARY)
    library = folder / "libtls_probe.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-O1", "-o", str(library), str(source)],
                   check=True)
    return library


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)


def load_library(library: Path) -> str:
    return f"import ctypes; assert ctypes.CDLL({str(library)!r}).memscope_tls_probe() == 1"


@pytest.fixture(scope="module")
def library_loads_alone(tls_library: Path) -> None:
    alone = run_python(load_library(tls_library))
    if alone.returncode != 0:
        pytest.skip("this interpreter cannot load 1 KiB of initial-exec TLS even without memscope: "
                    + alone.stderr.strip().splitlines()[-1])


@pytest.mark.usefixtures("library_loads_alone")
def test_an_initial_exec_tls_library_loads_after_memscope(tls_library: Path) -> None:
    result = run_python("import memscope\n" + load_library(tls_library))
    assert result.returncode == 0, result.stderr


@pytest.mark.usefixtures("library_loads_alone")
def test_memscope_loads_after_an_initial_exec_tls_library(tls_library: Path) -> None:
    result = run_python(load_library(tls_library) + "\nimport memscope; memscope.Allocator('host')")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("order", ["memscope, torch", "torch, memscope"])
def test_memscope_and_torch_import_into_one_process(order: str) -> None:
    pytest.importorskip("torch")
    result = run_python(f"import {order}; import memscope.torch")
    assert result.returncode == 0, result.stderr
