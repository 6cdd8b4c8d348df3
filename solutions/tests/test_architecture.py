"""The instructor's wing in rooms (issue 24), held: folders by responsibility that import only what their
docstring allows, no import circle anywhere, no module over 350 lines, no folder of the wing over 12 modules,
no test or module that edits ``sys.path``, scripts that are thin command lines over importable code.

Imports are read from the source (every ``import`` and ``from ... import``, inside functions too), never
run. Each rule is shown to fail on a planted tree that breaks it.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from course_lib.provided.layout import REPO_ROOT

PACKAGES = {"course_lib": REPO_ROOT / "course_lib", "course_ref": REPO_ROOT / "solutions" / "course_ref",
            "course_admin": REPO_ROOT / "solutions" / "course_admin"}
WING = REPO_ROOT / "solutions" / "course_admin"
MAX_LINES, MAX_MODULES = 350, 12
# Python code this project writes: every module of the three packages, the scripts, the tests and their helpers
CODE = [REPO_ROOT / "course_lib", REPO_ROOT / "solutions" / "course_ref", WING, REPO_ROOT / "solutions" / "scripts",
        REPO_ROOT / "solutions" / "tests", REPO_ROOT / "scripts", REPO_ROOT / "book" / "_code", REPO_ROOT / "tests"]
# The programs the sandbox starts under `python -I -S`, which gives them no import path at all: they build the
# path the learner's code runs with (the box first, then the venv's site-packages). Nothing imports them.
SANDBOX_ENTRIES = {"solutions/course_admin/sandbox/child.py", "solutions/course_admin/sandbox/zygote.py"}


def python_files(roots: list[Path]) -> list[Path]:
    return sorted(p for root in roots for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def module_names(packages: dict[str, Path]) -> dict[str, Path]:
    """{dotted module name: file} of every module of ``packages``."""
    found = {}
    for name, base in packages.items():
        for path in python_files([base]):
            parts = [name, *path.relative_to(base).with_suffix("").parts]
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def import_graph(packages: dict[str, Path]) -> dict[str, set[str]]:
    """{module: the modules of ``packages`` it imports}, from its source; a package's own __init__ is left out
    of its children's imports (importing ``a.b`` always runs ``a``)."""
    modules = module_names(packages)

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets |= {t for a in node.names if (t := known(a.name))}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets |= {t for n in [base, *(f"{base}.{a.name}" for a in node.names)] if (t := known(n))}
        graph[module] = {t for t in targets if t != module and not module.startswith(t + ".")}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), or a module importing itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def may_import(wing: Path = WING) -> dict[str, set[str]]:
    """{folder: the other folders it may import}, read from each folder's docstring ("May import: ``x``, ``y``"),
    the one place the rule is written; course_lib.provided is open to all."""
    rules = {}
    for init in sorted(wing.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        allowed = re.search(r"May import: (.*)", doc, re.DOTALL)
        assert allowed, f"{init.relative_to(REPO_ROOT)} must say what the folder may import ('May import: ...')"
        rules[init.parent.name] = set(re.findall(r"``(\w+)``", allowed.group(1))) - {"course_lib", "course_admin"}
    return rules


def folder_violations(graph: dict[str, set[str]], may_import: dict[str, set[str]]) -> list[str]:
    """``course_admin.<folder>`` modules importing a folder their docstring does not allow."""
    def folder(module: str) -> str | None:
        parts = module.split(".")
        return parts[1] if parts[0] == "course_admin" and len(parts) > 1 else None

    bad = []
    for module, targets in sorted(graph.items()):
        mine = folder(module)
        if mine is None:
            continue
        for target in sorted(targets):
            theirs = folder(target)
            if theirs and theirs != mine and theirs not in may_import.get(mine, set()):
                bad.append(f"{module} imports {target}: {mine}/ may import {sorted(may_import.get(mine, set()))}")
    return bad


def path_edits(path: Path) -> list[str]:
    """Each statement of ``path`` that changes ``sys.path`` (an assignment, a slice or an in-place call);
    text inside strings (code written for another process) is not a statement."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[ast.AST] = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            targets = [node.func.value] if node.func.attr in ("insert", "append", "extend", "remove", "pop",
                                                                  "clear", "__setitem__", "__delitem__") else []
        elif isinstance(node, ast.Delete):
            targets = node.targets
        for t in targets:
            while isinstance(t, ast.Subscript):
                t = t.value
            if isinstance(t, ast.Attribute) and t.attr == "path" and isinstance(t.value, ast.Name) and t.value.id == "sys":
                found.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}")
    return found


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


# ---------------------------------------------------------------- the tree as it is
def test_no_import_circle_anywhere() -> None:
    graph = import_graph(PACKAGES)
    assert len(graph) > 80  # every module was read
    assert cycles(graph) == []


def test_each_folder_imports_only_what_its_docstring_allows() -> None:
    rules = may_import()
    folders = sorted(p.name for p in WING.iterdir() if (p / "__init__.py").is_file())
    assert sorted(rules) == folders and rules["sandbox"] == rules["intake"] == set()
    assert folder_violations(import_graph(PACKAGES), rules) == []
    # the map's table (book/appendix_map.md) says the same
    page = (REPO_ROOT / "book" / "appendix_map.md").read_text(encoding="utf-8")
    section = page.split("## The instructor's wing\n", 1)[1].split("\n## ", 1)[0]
    table = dict(re.findall(r"^\| `(\w+)/` \|.*\| ([^|]*) \|$", section, re.MULTILINE))
    assert {f: set(re.findall(r"`(\w+)`", table[f])) for f in folders} == rules


def test_the_wing_is_in_folders_of_at_most_twelve_modules() -> None:
    top = sorted(p.name for p in WING.glob("*.py"))
    assert top == ["__init__.py"], f"modules at the top of course_admin/: put each in its folder ({top})"
    for folder in (p for p in WING.iterdir() if p.is_dir() and p.name != "__pycache__"):
        modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        assert len(modules) <= MAX_MODULES, f"course_admin/{folder.name}/ holds {len(modules)} modules"


def test_no_module_over_350_lines() -> None:
    long = {str(p.relative_to(REPO_ROOT)): n for p in python_files(CODE)
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def test_no_test_or_module_edits_sys_path() -> None:
    edits = [e for p in python_files(CODE) for e in path_edits(p)
             if e.split(":")[0] not in SANDBOX_ENTRIES]
    assert edits == []
    for entry in SANDBOX_ENTRIES:  # the exceptions are still what they claim to be
        assert path_edits(REPO_ROOT / entry), entry


def test_scripts_are_thin_command_lines() -> None:
    for script in sorted((REPO_ROOT / "solutions" / "scripts").glob("*.py")):
        tree = ast.parse(script.read_text(encoding="utf-8"))
        imports = [n for n in tree.body if isinstance(n, ast.ImportFrom)]
        assert len(script.read_text(encoding="utf-8").splitlines()) <= 15, script
        assert [i.module.split(".")[:2] for i in imports] == [["course_admin", "measure"]], script
        assert not [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))], script


# ---------------------------------------------------------------- each rule can fail
def test_a_planted_circle_is_found(tmp_path: Path) -> None:
    root = write(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "from . import b\n",
                            "pkg/b.py": "def late():\n    from .a import x\n", "pkg/c.py": "import pkg.a\n"})
    graph = import_graph({"pkg": root / "pkg"})
    assert graph["pkg.c"] == {"pkg.a"}
    assert cycles(graph) == [["pkg.a", "pkg.b"]]  # found though one side imports inside a function


def test_a_planted_upward_import_is_found(tmp_path: Path) -> None:
    root = write(tmp_path, {"course_admin/__init__.py": "", "course_admin/sandbox/__init__.py": "",
                            "course_admin/grading/__init__.py": "", "course_admin/grading/plan.py": "",
                            "course_admin/sandbox/cold.py": "from ..grading import plan\n"})
    bad = folder_violations(import_graph({"course_admin": root / "course_admin"}), {"sandbox": set(), "grading": set()})
    assert any(b.startswith("course_admin.sandbox.cold imports course_admin.grading.plan: sandbox/") for b in bad), bad


@pytest.mark.parametrize("code", ["import sys\nsys.path.insert(0, 'x')\n", "import sys\nsys.path[:0] = ['x']\n",
                                  "import sys\nsys.path.append('x')\n", "import sys\nsys.path = ['x']\n"])
def test_a_planted_path_edit_is_found(tmp_path: Path, code: str, monkeypatch) -> None:
    planted = tmp_path / "t.py"
    planted.write_text(code + "TEXT = 'sys.path.insert(0, \"in a string\")'\n", encoding="utf-8")
    monkeypatch.setattr(f"{__name__}.REPO_ROOT", tmp_path)
    assert path_edits(planted) == ["t.py:2"]
