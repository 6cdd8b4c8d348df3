"""The book's execution cache (solutions/course_admin/book/course_sources.py): every executed page carries a digest of the
course's sources, so a cached page is reused only while nothing it may read has changed."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from course_admin.book import course_sources
from course_lib.provided.layout import LAYOUT


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of what the digest reads, to edit."""
    for pattern in (*course_sources.SOURCES, "solutions/course_admin/**/*.py", "book/*.md"):
        for path in LAYOUT.root.glob(pattern):
            if path.is_file() and "__pycache__" not in path.parts:
                target = tmp_path / path.relative_to(LAYOUT.root)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
    return tmp_path


def test_the_config_caches_and_loads_the_extension() -> None:
    config = (LAYOUT.root / "_config.yml").read_text()
    assert "execute_notebooks: cache" in config and "course_admin.book.course_sources" in config


def test_the_digest_is_the_repositorys_and_is_stable(tree: Path) -> None:
    assert course_sources.sources_digest(tree) == course_sources.sources_digest(LAYOUT.root)
    assert course_sources.sources_digest(tree) == course_sources.sources_digest(tree)


@pytest.mark.parametrize("edited", ["tests/specs/ch02.py", "solutions/course_ref/attention.py",
                                    "course_lib/provided/capstone/data.py", "solutions/mistakes/ch08_seed000.py",
                                    "tests/reference/ch07.pt", "book/_code/beam.py"])
def test_editing_any_source_a_page_may_read_changes_the_digest(tree: Path, edited: str) -> None:
    before = course_sources.sources_digest(tree)
    with open(tree / edited, "ab") as fh:
        fh.write(b"\n# edited\n")
    assert course_sources.sources_digest(tree) != before, f"a page reading {edited} would show stale outputs"


def pages(tree: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted((tree / "book").glob("*.md"))}


def test_a_grader_module_runs_again_only_the_pages_that_reach_it(tree: Path) -> None:
    """No page of the book imports the grader: an edit to solutions/course_admin/ keeps every page's digest. A
    planted page that does (directly, or through the `course` command, which names the instructor's modules by
    string, verify among them, whose relative imports reach trained.py) gets a new digest from the same edit."""
    planted = {"direct": "```{code-cell} ipython3\nfrom course_admin.grading import trained\n```\n",
               "by name": "```{code-cell} ipython3\nfrom course_lib.provided.cli import main\n```\n"}
    before = {name: course_sources.reads_digest(text, tree) for name, text in {**pages(tree), **planted}.items()}
    assert len(pages(tree)) >= 10
    with open(tree / "solutions/course_admin/grading/trained.py", "ab") as fh:
        fh.write(b"\n# edited\n")
    course_sources.names_in_module.cache_clear()
    after = {name: course_sources.reads_digest(text, tree) for name, text in {**pages(tree), **planted}.items()}
    assert {name for name in before if before[name] != after[name]} == set(planted)
    assert course_sources.sources_digest(tree) == course_sources.sources_digest(LAYOUT.root)


def test_a_page_reads_what_its_cells_import_and_the_books_own_code(tree: Path) -> None:
    read = {p.relative_to(tree).as_posix() for p in course_sources.reads(pages(tree)["08_capstone.md"], tree)}
    assert {"course_lib/provided/capstone/handin.py", "course_lib/provided/layout.py", "book/_code/figures.py",
            "course_lib/provided/__init__.py"} <= read
    assert not [p for p in read if p.startswith("solutions/course_admin/")]


def test_pycache_and_files_outside_the_sources_do_not(tree: Path) -> None:
    before = course_sources.sources_digest(tree)
    with open(tree / "solutions/course_admin/book/catalogs.py", "ab") as fh:  # the book's own extensions render only
        fh.write(b"\n# edited\n")
    (tree / "course_lib" / "__pycache__").mkdir(exist_ok=True)
    (tree / "course_lib" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"compiled")
    (tree / "README.md").write_text("prose")
    assert course_sources.sources_digest(tree) == before


class App:
    class config:
        course_sources_digest = "abc123"


def test_an_executed_page_gets_a_hidden_cell_with_the_digest_and_a_prose_page_nothing() -> None:
    page = ["# Title\n\n```{code-cell} ipython3\nx = 1\n```\n"]
    course_sources._append(App, "book/02_attention", page)
    figures = course_sources.figures_digest("book/02_attention")
    grader = course_sources.reads_digest("```{code-cell} ipython3\nx = 1\n```\n")
    assert page[0].endswith("```{code-cell} ipython3\n:tags: [remove-cell]\n\n"
                            f"# course sources digest: abc123, grader {grader}, figures {figures}\n```\n")
    prose = ["# Glossary\n\nNo cells here.\n"]
    course_sources._append(App, "book/appendix_glossary", prose)
    assert prose == ["# Glossary\n\nNo cells here.\n"]


def test_a_pages_figure_catalog_runs_that_page_again_and_no_other(tmp_path: Path) -> None:
    """A page draws its figures in each language as it runs (book/_code/figures.py): a new translation of one
    of its figures changes its digest, so the page runs again; another page's stays, so it does not."""
    folder = tmp_path / "book" / "locale" / "zh_CN" / "figures"
    folder.mkdir(parents=True)
    (folder / "02_attention.json").write_text('{"key": "键"}', encoding="utf-8")
    before = {page: course_sources.figures_digest(page, tmp_path) for page in ("book/02_attention", "book/05_encoder")}
    (folder / "02_attention.json").write_text('{"key": "键", "query": "查询"}', encoding="utf-8")
    assert course_sources.figures_digest("book/02_attention", tmp_path) != before["book/02_attention"]
    assert course_sources.figures_digest("book/05_encoder", tmp_path) == before["book/05_encoder"]
