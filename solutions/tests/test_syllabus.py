"""The chapter list is written once, in course_lib/provided/syllabus.py; everything else must agree.

Checked against it: the chapters part of _toc.yml (exactly the ready chapters' pages, in order), the
chapter tables of README.md and book/intro.md (numbers, titles, what the learner implements, status),
and the first heading of each ready chapter's page. A chapter is ready when tests/specs/chNN.py
exists; its title must equal the spec's TITLE. Each failure says which file to fix and how.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
import yaml

from course_lib.provided import chapters, syllabus
from course_lib.provided.layout import LAYOUT, REPO_ROOT, Layout, chapter_facts
from course_lib.provided.syllabus import SYLLABUS, Chapter

SOURCE = "course_lib/provided/syllabus.py"
COLUMNS = ("NN", "title", "what the learner implements", "status")


@dataclass(frozen=True)
class TableStyle:
    """How one file writes the chapter table: which text it shows and its words for the status."""

    file: str                               # relative to the repository root
    implements: Callable[[Chapter], str]    # the syllabus field of the third column
    ready_word: str
    planned_word: str
    links: bool                             # a ready chapter's title links to its page


README_TABLE = TableStyle("README.md", lambda c: c.implements, "**ready**", "planned", links=False)
INTRO_TABLE = TableStyle("book/intro.md", lambda c: c.in_detail, "**live**", "coming", links=True)


# ---------------------------------------------------------------- comparisons: text in, problems out
def _cells(line: str) -> list[str]:
    line = line.strip()
    return [c.strip() for c in line.strip("|").split("|")] if line.startswith("|") else []


def chapter_rows(markdown: str) -> list[list[str]] | None:
    """The body rows of the first Markdown table whose header starts with ``| NN |``; None if none."""
    lines = markdown.splitlines()
    for i, line in enumerate(lines):
        if _cells(line)[:1] == ["NN"]:
            rows = []
            for row in lines[i + 2:]:       # skip the |---| line
                if not _cells(row):
                    break
                rows.append(_cells(row))
            return rows
    return None


def expected_row(chapter: Chapter, style: TableStyle, ready: bool) -> list[str]:
    title = f"[{chapter.title}]({chapter.page}.md)" if style.links and ready else chapter.title
    return [chapter.number, title, style.implements(chapter), style.ready_word if ready else style.planned_word]


def table_problems(markdown: str, style: TableStyle, ready: set[str]) -> list[str]:
    """What in ``markdown``'s chapter table disagrees with the syllabus (``ready``: chapter numbers)."""
    rows = chapter_rows(markdown)
    if rows is None:
        return [f"{style.file}: no chapter table (a table whose header starts with `| NN |`); "
                f"restore it, one row per chapter of {SOURCE}"]
    problems = []
    got, want = [r[0] for r in rows], [c.number for c in SYLLABUS]
    if got != want:
        problems.append(f"{style.file}: the chapter table has rows {got}, {SOURCE} has chapters {want}: "
                        f"add, remove or reorder rows to match")
    by_number = {r[0]: r for r in rows}
    for chapter in SYLLABUS:
        row = by_number.get(chapter.number)
        if row is None:
            continue
        is_ready = chapter.number in ready
        for column, have, need in zip(COLUMNS, row + [""] * len(COLUMNS), expected_row(chapter, style, is_ready)):
            if have != need:
                why = ""
                if column == "status":
                    why = (f" (chapter {chapter.number} {'has' if is_ready else 'has no'} spec "
                           f"tests/specs/ch{chapter.number}.py)")
                    problems.append(f"{style.file}, chapter {chapter.number}, column 'status': has {have!r}, "
                                    f"write {need!r}{why}")
                    continue
                elif column == "title" and style.links and is_ready:
                    why = " (a ready chapter's title links to its page)"
                problems.append(f"{style.file}, chapter {chapter.number}, column {column!r}: has {have!r}, "
                                f"{SOURCE} says {need!r}{why}; fix the table, or the syllabus if the table is right")
        if len(row) != len(COLUMNS):
            problems.append(f"{style.file}, chapter {chapter.number}: {len(row)} cells, the table has "
                            f"{len(COLUMNS)} columns ({', '.join(COLUMNS)})")
    return problems


def toc_problems(toc_text: str, ready: list[Chapter]) -> list[str]:
    """Whether _toc.yml's part captioned "Chapters" lists exactly ``ready``'s pages, in order."""
    toc = yaml.safe_load(toc_text) or {}
    parts = [p for p in toc.get("parts", []) if p.get("caption") == "Chapters"]
    if len(parts) != 1:
        return [f"_toc.yml: found {len(parts)} parts with `caption: Chapters`; keep exactly one"]
    got = [entry.get("file") for entry in parts[0].get("chapters") or []]
    want = [f"book/{c.page}" for c in ready]
    if got != want:
        return [f"_toc.yml: the Chapters part lists {got}, but the ready chapters (those with "
                f"tests/specs/chNN.py) are {want}, in {SOURCE}'s order: make its `- file:` lines exactly these"]
    return []


def heading_problems(page_text: str, chapter: Chapter) -> list[str]:
    """Whether the first `# ` line of a chapter's page contains the chapter's title."""
    where = f"book/{chapter.page}.md"
    heading = next((line for line in page_text.splitlines() if line.startswith("# ")), None)
    if heading is None:
        return [f"{where}: no `# ` heading; start the page with `# {int(chapter.number)}. {chapter.title}`"]
    if chapter.title not in heading:
        return [f"{where}: the heading {heading!r} lacks the title {chapter.title!r} of {SOURCE}; "
                f"write `# {int(chapter.number)}. {chapter.title}` (or fix the syllabus and the spec's TITLE)"]
    return []


def _read(rel: str) -> str:
    return (REPO_ROOT / rel).read_text(encoding="utf-8")


def _ready_numbers() -> set[str]:
    return {c.number for c in syllabus.ready()}


# ---------------------------------------------------------------- the syllabus itself
def test_chapter_numbers_are_unique_and_in_order() -> None:
    numbers = [c.number for c in SYLLABUS]
    assert numbers == sorted(set(numbers)), f"{SOURCE}: chapter numbers must be unique and ascending: {numbers}"


def test_every_chapter_with_checks_is_in_the_syllabus() -> None:
    missing = sorted(set(LAYOUT.chapters()) - {c.number for c in SYLLABUS})
    assert not missing, f"tests/specs/ch{missing[0]}.py exists but {SOURCE} has no chapter {missing[0]}: add it"


def test_ready_means_having_checks() -> None:
    assert [c.number for c in syllabus.ready()] == chapters.available()


def test_ready_follows_the_spec_file_not_a_flag(tmp_path: Path) -> None:
    other = Layout(tmp_path)
    assert syllabus.ready(other) == []
    other.specs.mkdir(parents=True)
    other.spec("03").write_text('TITLE = "Multi-head attention"\n')
    assert [c.number for c in syllabus.ready(other)] == ["03"]


@pytest.mark.parametrize("number", LAYOUT.chapters())
def test_title_of_a_ready_chapter_is_its_specs(number: str) -> None:
    spec_title, title = chapter_facts(number).title, syllabus.chapter(number).title
    assert title == spec_title, (f"chapter {number}: {SOURCE} says {title!r}, tests/specs/ch{number}.py's TITLE "
                                 f"says {spec_title!r}; make them equal (then the tables and the page heading)")


@pytest.mark.parametrize("chapter", SYLLABUS, ids=lambda c: c.number)
def test_page_stem_follows_the_chapter_number(chapter: Chapter) -> None:
    assert re.fullmatch(rf"{chapter.number}_[a-z0-9_]+", chapter.page), (
        f"{SOURCE}: chapter {chapter.number}'s page {chapter.page!r} must be NN_<name>, e.g. '02_attention'")
    exercise = LAYOUT.exercise_name(chapter.number)
    if exercise is not None:
        assert exercise == f"ch{chapter.page}", (
            f"chapter {chapter.number}: the exercise is {exercise!r} but the page is book/{chapter.page}.md; "
            f"the two share one name (chNN_<name> and NN_<name>): fix the page stem in {SOURCE}")


# ---------------------------------------------------------------- the places that repeat it
def test_toc_lists_exactly_the_ready_chapters() -> None:
    problems = toc_problems(_read("_toc.yml"), syllabus.ready())
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("style", [README_TABLE, INTRO_TABLE], ids=lambda s: s.file)
def test_chapter_table_agrees_with_the_syllabus(style: TableStyle) -> None:
    problems = table_problems(_read(style.file), style, _ready_numbers())
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("chapter", syllabus.ready(), ids=lambda c: c.number)
def test_page_heading_holds_the_title(chapter: Chapter) -> None:
    page = REPO_ROOT / "book" / f"{chapter.page}.md"
    assert page.is_file(), f"chapter {chapter.number} is ready but its page {LAYOUT.rel(page)} is missing"
    problems = heading_problems(page.read_text(encoding="utf-8"), chapter)
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------- the comparisons catch a disagreement
def _replace(text: str, old: str, new: str) -> str:
    assert old in text, f"the planted change needs {old!r} in the text; update this test"
    return text.replace(old, new, 1)


ATTENTION = syllabus.chapter("02")
# a chapter still planned, for the plants that pretend it is ready (the last one is built last)
# one chapter whose status the plants flip: the last planned one (pretend it is ready), else the last
# ready one (pretend it is still planned)
FLIPPED = next((c for c in reversed(SYLLABUS) if not c.ready()), SYLLABUS[-1])
PLANTED: dict[str, Callable[[], list[str]]] = {
    "README title": lambda: table_problems(_replace(_read("README.md"), "| 02 | Attention |", "| 02 | Attention! |"),
                                           README_TABLE, _ready_numbers()),
    "README row gone": lambda: table_problems(_replace(_read("README.md"), "| 02 | Attention |", "| 92 | Attention |"),
                                              README_TABLE, _ready_numbers()),
    "README status": lambda: table_problems(_read("README.md"), README_TABLE, _ready_numbers() ^ {FLIPPED.number}),
    "intro link": lambda: table_problems(_replace(_read("book/intro.md"), "[Attention](02_attention.md)", "Attention"),
                                         INTRO_TABLE, _ready_numbers()),
    "intro text": lambda: table_problems(_replace(_read("book/intro.md"), "the warmup schedule", "a schedule"),
                                         INTRO_TABLE, _ready_numbers()),
    "intro table gone": lambda: table_problems(_replace(_read("book/intro.md"), "| NN |", "| No |"),
                                               INTRO_TABLE, _ready_numbers()),
    "toc and the ready pages differ": lambda: toc_problems(_read("_toc.yml"),
                                                           [c for c in SYLLABUS if c.ready() != (c is FLIPPED)]),
    "toc page removed": lambda: toc_problems(_replace(_read("_toc.yml"), "- file: book/02_attention", ""),
                                             syllabus.ready()),
    "heading": lambda: heading_problems(_replace(_read("book/02_attention.md"), "# 2. Attention", "# 2. Attending"),
                                        ATTENTION),
}


@pytest.mark.parametrize("plant", PLANTED, ids=str)
def test_a_planted_disagreement_is_caught(plant: str) -> None:
    problems = PLANTED[plant]()
    assert problems, f"the comparison missed a planted disagreement ({plant})"
    assert all(p.startswith(("README.md", "book/", "_toc.yml")) for p in problems), (
        f"each problem should start with the file to fix: {problems}")
