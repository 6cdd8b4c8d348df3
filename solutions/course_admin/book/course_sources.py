"""Sphinx extension: tie each page's cached execution to what the page reads, so the cache never shows stale
numbers and an edit runs again only the pages it can change.

The book runs with ``execute_notebooks: cache``: jupyter-cache reuses a page's executed outputs while the
page's code cells are unchanged. A page's output also depends on code the page imports (the reference
implementation, the specs whose tables it prints, the provided helpers, the data packages). So on every
read of a page (Sphinx's ``source-read``) this extension appends one hidden, do-nothing code cell whose
only content is a digest of what the page may read: the course's sources and the packages' versions (the
same for every page: edit any and every page runs again, exactly as a forced build would), and the grader's
modules the page reaches by its imports (solutions/course_admin/, followed import by import and through the
module names a module imports by string: an edit to a grading module runs again only the pages that reach it,
often none). Edit a page's prose alone and its cached outputs are reused.
"""
from __future__ import annotations

import ast
import hashlib
import re
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from course_lib.provided.layout import REPO_ROOT

ROOT = REPO_ROOT
# what executed pages read besides their own cells: code and specs, reference outputs, the seed's
# classifier, recorded runs (book/data), the book's own code (book/_code)
SOURCES = ("course_lib/**/*.py", "solutions/course_ref/*.py", "solutions/mistakes/*.py", "solutions/hidden/*.py",
           "solutions/scripts/*.py", "tests/specs/*.py", "tests/reference/*.pt", "book/data/*", "book/_code/*.py",
           "pyproject.toml")
# The grader's modules count for a page only where the page reaches them (reads_digest).
GRADER = "solutions/course_admin/"
PACKAGE_ROOTS = ("", "solutions/")  # course_lib at the root; course_admin and course_ref under solutions/
BY_NAME = re.compile(r"^course_admin(\.\w+)+$")  # a module imported by its name (importlib, the CLI's table)
CELL = re.compile(r"```\{code-cell\}[^\n]*\n(.*?)```", re.S)
IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import[ \t]+\(?([\w, \t]+)|import[ \t]+([\w., \t]+))", re.M)
# ...but not the book's own Sphinx extensions (this folder): they shape how a page is rendered (and Sphinx reads
# every page again on each `make book`), never what its code computes, and no page imports them. Without this
# an edit to the Chinese edition's catalog check re-executed all fourteen pages (5 to 6 minutes).
EXCLUDED = ("solutions/course_admin/book/",)
PACKAGES = ("torch", "numpy", "matplotlib", "snownlp", "scikit-learn", "sacrebleu", "myst-nb", "ipykernel")
MARK = "course sources digest"


def sources_digest(root: Path = ROOT) -> str:
    """sha256 over the files of SOURCES (path and bytes, sorted) and the versions of PACKAGES."""
    h = hashlib.sha256()
    for path in sorted({p for pattern in SOURCES for p in root.glob(pattern) if p.is_file()}):
        if "__pycache__" in path.parts or path.relative_to(root).as_posix().startswith(EXCLUDED):
            continue
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    for name in PACKAGES:
        try:
            h.update(f"{name}=={metadata.version(name)}\n".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{name} absent\n".encode())
    return h.hexdigest()[:20]


def module_file(name: str, root: Path = ROOT) -> Path | None:
    """The repository's file of module ``name`` (a package's __init__.py), or None for one outside it."""
    for base in PACKAGE_ROOTS:
        path = root / base / name.replace(".", "/")
        for candidate in (path.with_suffix(".py"), path / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def names_in_code(text: str) -> set[str]:
    """Module names a page's cells import: each ``import a.b`` and ``from a.b import c`` (also as a.b.c)."""
    names: set[str] = set()
    for module, members, plain in IMPORT.findall(text):
        if module:
            names |= {module} | {f"{module}.{m.split()[0]}" for m in members.split(",") if m.strip()}
        else:
            names |= {m.split()[0] for m in plain.split(",") if m.strip()}
    return names


@lru_cache(maxsize=None)
def names_in_module(path: Path, root: Path = ROOT) -> frozenset[str]:
    """Module names a repository module imports: its import statements (relative ones resolved), and strings
    that name a grader module (imported by importlib, or through a table of commands such as the CLI's)."""
    rel = list(path.relative_to(root).with_suffix("").parts)
    package = (rel[1:] if rel[0] == "solutions" else rel)[:-1]  # the module's package, as imports name it
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            names |= {base} | {f"{base}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and BY_NAME.match(node.value):
            names.add(node.value)
    return frozenset(names)


def reads(text: str, root: Path = ROOT) -> list[Path]:
    """The repository's modules a page with source ``text`` may import, directly or not; the book's own code
    (book/_code/*.py, which pages load by path) counts as read by every page."""
    files = set((root / "book" / "_code").glob("*.py"))
    todo = list(names_in_code("\n".join(CELL.findall(text))))
    todo += [name for path in files for name in names_in_module(path, root)]
    seen: set[str] = set()
    while todo:
        parts = todo.pop().split(".")
        for module in (".".join(parts[:i]) for i in range(1, len(parts) + 1)):  # a module's packages run too
            if module in seen:
                continue
            seen.add(module)
            path = module_file(module, root)
            if path is not None:
                files.add(path)
                todo += names_in_module(path, root)
    return sorted(files)


def reads_digest(text: str, root: Path = ROOT) -> str:
    """sha256 over the grader's modules (solutions/course_admin/, less the book's extensions) a page reaches."""
    h = hashlib.sha256()
    for path in reads(text, root):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(GRADER) and not rel.startswith(EXCLUDED):
            h.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def digest_cell(digest: str) -> str:
    return f"\n\n```{{code-cell}} ipython3\n:tags: [remove-cell]\n\n# {MARK}: {digest}\n```\n"


def figures_digest(docname: str, root: Path = ROOT) -> str:
    """A digest of the page's figure catalogs (book/locale/*/figures/PAGE.json): the page draws its figures in
    each language as it runs (book/_code/figures.py), so a new translation runs that page again, and only it."""
    h = hashlib.sha256()
    for path in sorted((root / "book" / "locale").glob(f"*/figures/{docname.rsplit('/', 1)[-1]}.json")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def _append(app: Any, docname: str, source: list[str]) -> None:
    if "{code-cell}" in source[0]:  # an executed page (plain Markdown pages have no cells and no cache)
        source[0] += digest_cell(f"{app.config.course_sources_digest}, grader {reads_digest(source[0])}, "
                                 f"figures {figures_digest(docname)}")


def setup(app: Any) -> dict[str, Any]:
    app.add_config_value("course_sources_digest", sources_digest(), "env")
    app.connect("source-read", _append)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
