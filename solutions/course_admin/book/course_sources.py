"""Sphinx extension: tie each page's cached execution to the course's sources, so the cache never shows
stale numbers.

The book runs with ``execute_notebooks: cache``: jupyter-cache reuses a page's executed outputs while the
page's code cells are unchanged. A page's output also depends on code the page imports (the reference
implementation, the specs whose tables it prints, the provided helpers, the data packages). So on every
read of a page (Sphinx's ``source-read``) this extension appends one hidden, do-nothing code cell whose
only content is a digest of those sources and of the packages' versions: edit any of them and every page
runs again, exactly as a forced build would; edit a page's prose alone and its cached outputs are reused.
"""
from __future__ import annotations

import hashlib
from importlib import metadata
from pathlib import Path
from typing import Any

from course_lib.provided.layout import REPO_ROOT

ROOT = REPO_ROOT
# what executed pages read besides their own cells: code and specs, reference outputs, the seed's
# classifier, recorded runs (book/data), the book's own code (book/_code)
SOURCES = ("course_lib/**/*.py", "solutions/course_ref/*.py", "solutions/mistakes/*.py", "solutions/hidden/*.py",
           "solutions/course_admin/**/*.py", "solutions/scripts/*.py", "tests/specs/*.py", "tests/reference/*.pt",
           "book/data/*", "book/_code/*.py", "pyproject.toml")
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
        source[0] += digest_cell(f"{app.config.course_sources_digest}, figures {figures_digest(docname)}")


def setup(app: Any) -> dict[str, Any]:
    app.add_config_value("course_sources_digest", sources_digest(), "env")
    app.connect("source-read", _append)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
