"""The hand-written stub python/memscope/_memscope.pyi matches the compiled extension: the same
names at module and class level, and the same parameters (names, order, kinds, which have
defaults) for every function and method, compared with the stub nanobind.stubgen writes from the
module itself. (mypy's stubtest cannot see inside nanobind functions, which are not Python
function objects, so it would report every one of them; types are not compared, since
nanobind's are derived from C++ and ours say more.)"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import memscope

STUB = Path(__file__).resolve().parents[1] / "memscope" / "_memscope.pyi"

# Members nanobind adds to every bound class that the stub need not repeat.
IMPLICIT_MEMBERS = {"__repr__", "__str__", "__init__", "__hash__", "__eq__", "__ne__"}
# Module attributes stubgen leaves out (test_version.py checks __version__).
IMPLICIT_MODULE_NAMES = {"__version__"}


@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # "positional", "either", "keyword", "*args", "**kwargs"
    has_default: bool


def params(f: ast.FunctionDef) -> list[Param]:
    a = f.args
    positional = [(p.arg, "positional") for p in a.posonlyargs] + [(p.arg, "either")
                                                                   for p in a.args]
    first_default = len(positional) - len(a.defaults)  # defaults belong to the last ones
    out = [Param(name, kind, i >= first_default) for i, (name, kind) in enumerate(positional)]
    if a.vararg:
        out.append(Param(a.vararg.arg, "*args", False))
    out += [Param(p.arg, "keyword", d is not None)
            for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)]
    if a.kwarg:
        out.append(Param(a.kwarg.arg, "**kwargs", False))
    if out and out[0].name in ("self", "cls"):
        out = out[1:]
    return out


def flatten(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements, with `if sys.version_info ...` blocks replaced by the branch this Python
    takes (other conditions: both branches)."""
    out: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.If):
            test = ast.unparse(node.test)
            if test.startswith("sys.version_info"):
                taken = eval(test, {"sys": sys})  # a comparison of version tuples
                out += flatten(node.body if taken else node.orelse)
            else:
                out += flatten(node.body) + flatten(node.orelse)
        else:
            out.append(node)
    return out


@dataclass
class Scope:
    functions: dict[str, list[list[Param]]]  # overloads: one parameter list each
    attributes: set[str]  # properties, annotated names, re-exported names
    classes: dict[str, Scope]


def read_scope(body: list[ast.stmt]) -> Scope:
    scope = Scope({}, set(), {})
    for node in flatten(body):
        if isinstance(node, ast.FunctionDef):
            decorators = {ast.unparse(d) for d in node.decorator_list}
            if "property" in decorators or any(d.endswith((".setter", ".deleter"))
                                               for d in decorators):
                scope.attributes.add(node.name)
            else:
                scope.functions.setdefault(node.name, []).append(params(node))
        elif isinstance(node, ast.ClassDef):
            scope.classes[node.name] = read_scope(node.body)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if ast.unparse(node.annotation) != "TypeAlias":  # stub-only aliases
                scope.attributes.add(node.target.id)
        elif isinstance(node, ast.ImportFrom) and node.module == "memscope":
            scope.attributes.update(a.asname or a.name for a in node.names)
    return scope


def compatible(ours: list[Param], theirs: list[Param]) -> bool:
    if len(ours) != len(theirs):
        return False
    for o, t in zip(ours, theirs, strict=True):
        if o.has_default != t.has_default or (o.kind == "keyword") != (t.kind == "keyword"):
            return False
        if (t.kind in ("*args", "**kwargs")) != (o.kind in ("*args", "**kwargs")):
            return False
        if t.kind in ("either", "keyword") and o.name != t.name:  # by keyword: names matter
            return False
    return True


def differences(ours: Scope, theirs: Scope, where: str) -> list[str]:
    found = []
    names_ours = set(ours.functions) | ours.attributes | set(ours.classes)
    names_theirs = set(theirs.functions) | theirs.attributes | set(theirs.classes)
    implicit = IMPLICIT_MEMBERS if where else IMPLICIT_MODULE_NAMES
    for name in sorted(names_theirs - names_ours - implicit):
        found.append(f"{where}{name}: in the extension, not in the stub")
    for name in sorted(names_ours - names_theirs - implicit):
        found.append(f"{where}{name}: in the stub, not in the extension")
    for name in sorted(set(ours.functions) & set(theirs.functions)):
        for o in ours.functions[name]:
            if not any(compatible(o, t) for t in theirs.functions[name]):
                found.append(f"{where}{name}: stub parameters {[p.name for p in o]} match no "
                             f"signature of the extension's "
                             f"{[[p.name for p in t] for t in theirs.functions[name]]}")
    for name in sorted(set(ours.classes) & set(theirs.classes)):
        found += differences(ours.classes[name], theirs.classes[name], f"{where}{name}.")
    return found


def test_the_comparison_finds_mismatches() -> None:
    ours = read_scope(ast.parse("class A:\n    def f(self, x: int, y: int = 0) -> None: ...\n"
                                "def g(*, k: int) -> None: ...\n").body)
    theirs = read_scope(ast.parse("class A:\n    def f(self, x: int, z: int = 0) -> None: ...\n"
                                  "    def h(self) -> None: ...\n"
                                  "def g(k: int) -> None: ...\n").body)
    assert differences(ours, theirs, "") == [
        "g: stub parameters ['k'] match no signature of the extension's [['k']]",
        "A.h: in the extension, not in the stub",
        "A.f: stub parameters ['x', 'y'] match no signature of the extension's [['x', 'z']]"]
    assert differences(ours, ours, "") == []


def test_stub_matches_the_extension(tmp_path: Path) -> None:
    pytest.importorskip("nanobind.stubgen")
    generated = tmp_path / "_memscope.pyi"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    command = [sys.executable, "-m", "nanobind.stubgen", "-q", "-P", "-m", "memscope._memscope",
               "-o", str(generated)]
    subprocess.run(command, check=True, env=env, capture_output=True, text=True)
    ours = read_scope(ast.parse(STUB.read_text()).body)
    theirs = read_scope(ast.parse(generated.read_text()).body)
    problems = differences(ours, theirs, "")
    assert not problems, "\n".join(problems)


def test_the_package_uses_this_stub() -> None:
    installed = Path(memscope._memscope.__file__).with_name("_memscope.pyi")
    assert installed.read_text() == STUB.read_text(), "rebuild: the build's copy is stale"
