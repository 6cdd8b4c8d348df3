"""`make book` executes two pages at once (course_admin/book/build.py): Sphinx's parallel read, one page a task,
the longest page first. Sphinx reads in parallel only when every extension says it may; three of the book's
say nothing and are declared safe at the version read (SILENT_BUT_SAFE). Shown here on the book's own
configuration, with Sphinx stopped before it reads a page: the declared set allows a parallel read and write,
and the same extensions as shipped (the planted failure) make Sphinx fall back to one page at a time.
"""
from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest
import yaml

from course_admin.book import build
from course_lib.provided.layout import REPO_ROOT


def the_books_pages() -> list[str]:
    toc = yaml.safe_load((REPO_ROOT / "_toc.yml").read_text(encoding="utf-8"))
    return [toc["root"]] + [c["file"] for part in toc["parts"] for c in part["chapters"]]


def test_one_page_a_task_the_longest_first() -> None:
    pages = the_books_pages()
    chunks = build.longest_first(sorted(pages), 2)
    assert all(len(chunk) == 1 for chunk in chunks) and sorted(c[0] for c in chunks) == sorted(pages)
    sizes = [(REPO_ROOT / f"{c[0]}.md").stat().st_size for c in chunks]
    assert sizes == sorted(sizes, reverse=True)
    assert chunks[0] == ["book/08_capstone"], chunks[:3]  # the page that trains the capstone's quick run


def parallel_allowed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, bool]:
    """Start Sphinx as build_english does, on the book's configuration, and ask it instead of building. What that
    changes in this process is put back after the test: the environment (the CJK font extension points IPYTHONDIR
    at its kernels' start-up file, which a later build in a subprocess would inherit) and Sphinx's make_chunks."""
    import sphinx.builders
    from sphinx.application import Sphinx

    monkeypatch.setattr(sphinx.builders, "make_chunks", sphinx.builders.make_chunks)
    seen: dict[str, bool] = {}

    def ask(app: Sphinx, *args: object, **kwargs: object) -> None:
        seen.update(read=app.is_parallel_allowed("read"), write=app.is_parallel_allowed("write"),
                    jobs=app.parallel)

    monkeypatch.setattr(Sphinx, "build", ask)
    environment = dict(os.environ)
    try:
        build.build_english(2, out=tmp_path / "html", doctrees=tmp_path / "doctrees")
    finally:
        os.environ.clear()
        os.environ.update(environment)
    return seen


def test_the_books_extensions_allow_a_parallel_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in build.SILENT_BUT_SAFE:  # as shipped, whatever this process declared before
        module = importlib.import_module(name)
        monkeypatch.setattr(module, "setup", getattr(module.setup, "original", module.setup))
    assert parallel_allowed(tmp_path, monkeypatch) == {"read": True, "write": True, "jobs": 2}


def test_without_the_declarations_sphinx_reads_one_page_at_a_time(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build, "declare_silent_safe", lambda: None)
    for name in build.SILENT_BUT_SAFE:
        module = importlib.import_module(name)
        monkeypatch.setattr(module, "setup", getattr(module.setup, "original", module.setup))
    seen = parallel_allowed(tmp_path, monkeypatch)
    assert seen["read"] is False, seen  # (Sphinx takes an extension that says nothing as safe to write)
