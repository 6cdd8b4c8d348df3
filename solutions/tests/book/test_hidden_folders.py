"""`make book` reads the book's own pages only: a second virtual environment in a hidden folder of the checkout
(a `.venv-gpu` beside `.venv`, as a learner with a GPU makes one) holds the README and LICENSE files of numpy
and torch, and Sphinx would take them for pages ("document isn't included in any toctree", an error under
--warningiserror). A tiny book with the repository's own exclude_patterns is built beside such a folder; the
same book without the hidden-folder patterns is the planted failure that shows the build would see them.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from course_lib.provided.layout import REPO_ROOT

HIDDEN = ('.*', '.*/**', '**/.*', '**/.*/**')


def build(root: Path, exclude: list[str]) -> subprocess.CompletedProcess:
    (root / "book").mkdir(parents=True)
    (root / "book" / "01_intro.md").write_text("# 1. Intro\n\nA page.\n", encoding="utf-8")
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/01_intro\n", encoding="utf-8")
    site = root / ".venv-gpu" / "lib" / "python3.11" / "site-packages"
    for package in ("numpy", "torch"):
        (site / package).mkdir(parents=True)
        (site / package / "README.md").write_text(f"# {package}\n\nNot a page of the course.\n", encoding="utf-8")
        (site / package / "LICENSE.md").write_text("# License\n\nNot a page either.\n", encoding="utf-8")
    config = {"title": "tiny", "only_build_toc_files": True, "exclude_patterns": exclude,
              "execute": {"execute_notebooks": "off"}}
    (root / "_config.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return subprocess.run([str(Path(sys.executable).parent / "jupyter-book"), "build", str(root), "--path-output",
                           str(root), "--warningiserror"], capture_output=True, text=True, timeout=600)


def the_books_patterns() -> list[str]:
    return yaml.safe_load((REPO_ROOT / "_config.yml").read_text(encoding="utf-8"))["exclude_patterns"]


def test_the_book_excludes_every_hidden_folder() -> None:
    assert set(HIDDEN) <= set(the_books_patterns()), "_config.yml's exclude_patterns lost its hidden-folder patterns"


@pytest.mark.slow
def test_a_hidden_virtual_environment_is_not_read_as_pages(tmp_path: Path) -> None:
    built = build(tmp_path / "ours", the_books_patterns())
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    html = tmp_path / "ours" / "_build" / "html"
    assert (html / "book" / "01_intro.html").is_file() and not list(html.rglob("README.html"))

    planted = build(tmp_path / "planted", [p for p in the_books_patterns() if p not in HIDDEN])
    assert planted.returncode != 0, "without the hidden-folder patterns the build should have seen .venv-gpu"
    assert ".venv-gpu" in planted.stdout + planted.stderr
