"""The English edition, its pages executed side by side: what ``jupyter-book build .`` does, on ``--jobs`` cores.

Jupyter Book's command reads (and so executes) the pages one after another. Two pages take most of the time
(chapter 08 trains the capstone's quick run, about 6 minutes on one core; chapter 07 about 2.5), and each
page's kernel uses one thread, so on two cores the other core idled for most of ``make book``. This module
calls the same ``build_sphinx`` with the same configuration as the command (the ``_config.yml`` of the
repository, ``_toc.yml``, the execution cache in ``_build/.jupyter_cache``) and Sphinx's parallel read, with
one page per task, the longest page first: a page's execution then runs beside another's.

The pages, their outputs and the cache are those of the serial build: each page still runs in a kernel of
its own, alone in its process; only which pages run at the same time changes. Every extension the book loads
says it is safe to read in parallel, but three say nothing, and were read and found safe (SILENT_BUT_SAFE
says why; ``declare_silent_safe`` declares them at the version read). Another extension that says nothing
would make Sphinx warn ("doing serial read") and, under ``--warningiserror``, fail the build: that is how a
new one, or a new version of those three, would be noticed.

    .venv/bin/python -m course_admin.book.build [--jobs N]      (N = 1: the pages one after another)
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from course_lib.provided.layout import LAYOUT

ROOT = LAYOUT.root
BUILD = ROOT / "_build"


def longest_first(docnames: Sequence[str], nproc: int, maxbatch: int = 10) -> list[list[str]]:
    """Sphinx's ``make_chunks`` replaced: one page a task, the largest source first (the pages that train
    models are the longest: 08, then 07), so the slowest page starts at once instead of last."""
    def size(docname: str) -> int:
        found = [ROOT / f"{docname}{suffix}" for suffix in (".md", ".ipynb", ".rst")]
        return max((p.stat().st_size for p in found if p.is_file()), default=0)
    return [[docname] for docname in sorted(docnames, key=lambda d: (-size(d), d))]


# Extensions the book loads whose ``setup`` says nothing about parallel builds, each read and found safe:
SILENT_BUT_SAFE = {
    # numbers sections across the table of contents: replaces TocTreeCollector.assign_section_numbers, which
    # Sphinx runs in the main process after every page is read and merged
    "sphinx_multitoc_numbering": "0.1.3",
    # copies MathJax into _static when the build has finished (build-finished, the main process)
    "sphinx-mathjax-offline": "0.0.2",
    # LaTeX only: its settings and env attributes are made for a LaTeX builder alone; its two transforms
    # change only the doctree of the page being read (attributes on the root page's toctree nodes)
    "sphinx_jupyterbook_latex": "1.0.0",
}


def declare_silent_safe() -> None:
    """Wrap the ``setup`` of each of SILENT_BUT_SAFE to return that it is safe to read and write in parallel.
    At another version than the one read, nothing is declared: Sphinx then warns and the build fails."""
    from importlib import import_module, metadata

    for name, version in SILENT_BUT_SAFE.items():
        module = import_module(name)
        if getattr(module.setup, "declared", False) or metadata.version(name.replace("_", "-")) != version:
            continue

        def setup(app: Any, original: Any = module.setup) -> dict[str, Any]:
            return {**(original(app) or {}), "parallel_read_safe": True, "parallel_write_safe": True}

        setup.declared = True  # type: ignore[attr-defined]
        setup.original = module.setup  # type: ignore[attr-defined]
        module.setup = setup


def run_sphinx(builder: str, out: Path, doctrees: Path | None, overrides: dict[str, Any], jobs: int = 1,
           quiet: bool = False) -> int:
    """Jupyter Book's ``build_sphinx`` on the repository's ``_config.yml`` and ``_toc.yml``, warnings as errors
    (kept going to list them all): the one call behind both editions (editions.py); 0 when it built."""
    from jupyter_book.sphinx import build_sphinx

    result: Any = build_sphinx(ROOT, out, noconfig=True, path_config=ROOT / "_config.yml", builder=builder,
                               confoverrides={"external_toc_path": (ROOT / "_toc.yml").as_posix(),
                                              "latex_individualpages": False, **overrides},
                               doctreedir=doctrees, warningiserror=True, keep_going=True, quiet=quiet, jobs=jobs)
    if isinstance(result, Exception):
        print(f"book: the build stopped: {result}", file=sys.stderr)
        return 1
    return result


def build_english(jobs: int, out: Path = BUILD / "html", doctrees: Path | None = None) -> int:
    """``jupyter-book build . --warningiserror --keep-going --path-output .``, with ``jobs`` processes; the
    doctrees beside ``out`` (``_build/.doctrees``) unless given."""
    import sphinx.builders

    if jobs == 1:
        return run_sphinx("html", out, doctrees, {}, jobs)
    declare_silent_safe()
    # the execution cache's database made here, before the pages are read in parallel: two readers of a fresh
    # cache each found no database and created its tables at once ("table settings already exists", seen on CI)
    from jupyter_cache import get_cache
    get_cache(BUILD / ".jupyter_cache").db
    chunks = sphinx.builders.make_chunks  # type: ignore[attr-defined]
    sphinx.builders.make_chunks = longest_first  # type: ignore[attr-defined]  # read and write by page
    try:
        return run_sphinx("html", out, doctrees, {}, jobs)
    finally:
        sphinx.builders.make_chunks = chunks  # type: ignore[attr-defined]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_admin.book.build", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="pages read (executed) at once; default: 2, or 1 on a one-core machine")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: give 1 (one page at a time) or more")
    # each page's kernel (a child of this process) takes its share of the cores: torch's two threads on a core
    # another page's training held waited on each other (chapter 01's page took 161 s beside 08's, not 16 s)
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // args.jobs)))
    return build_english(args.jobs)


if __name__ == "__main__":
    sys.exit(main())
