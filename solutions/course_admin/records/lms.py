"""Per-learner, per-chapter totals in the shape LMS gradebooks import.

    lms.csv          learner, then one column a chapter ("ch02 Attention"): the learner's points
                     (every row of the chapter: course_lib cases and written answers, as totals.csv)
    lms_canvas.csv   Canvas's gradebook-import shape: Student, SIS Login ID, Section, one column a
                     chapter, and a "Points Possible" row under the header (Canvas creates an assignment
                     for a column it does not know, out of those points)

A chapter a learner has no row of is left empty (an LMS leaves that grade untouched), never 0. Cells go
through gradebook.csv_cell, so an id that a spreadsheet would run as a formula starts with ``'``.
`course report` writes both; `course grade` writes them too when it calls ``write_lms(book.table(), out)``.
"""
from __future__ import annotations

import csv
from pathlib import Path

from course_lib.provided.layout import SpecError, chapter_facts

from .gradebook import csv_cell
from .rows import GradeRow

Table = list[tuple[str, GradeRow]]


def chapter_column(number: str) -> str:
    """A chapter's column heading: 'ch02 Attention' (the number alone when no spec names it)."""
    try:
        return f"ch{number} {chapter_facts(number).title}"
    except (SpecError, ValueError):
        return f"ch{number}"


def totals(table: Table) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """({learner: {chapter: points}}, {chapter: max points}) over every row but the submission notes."""
    points: dict[str, dict[str, float]] = {}
    per_max: dict[tuple[str, str], float] = {}
    for who, r in table:
        if r.kind == "submission":
            continue
        mine = points.setdefault(who, {})
        mine[r.chapter] = mine.get(r.chapter, 0.0) + r.points
        per_max[(who, r.chapter)] = per_max.get((who, r.chapter), 0.0) + r.max_points
    maxima: dict[str, float] = {}
    for (_, chapter), m in per_max.items():
        maxima[chapter] = max(maxima.get(chapter, 0.0), m)
    return points, maxima


def _write(path: Path, rows: list[list[object]]) -> Path:
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh, lineterminator="\n").writerows([[csv_cell(v) for v in row] for row in rows])
    tmp.replace(path)
    return path


def write_lms(table: Table, out: Path, learners: list[str] | None = None,
              chapters: list[str] | None = None) -> list[Path]:
    """Write out/lms.csv and out/lms_canvas.csv; ``learners`` (default: the table's) are the rows,
    ``chapters`` (default: every chapter the table holds) the columns. Returns the two paths."""
    points, maxima = totals(table)
    learners = sorted(set(learners or []) | set(points))
    chapters = chapters or sorted(maxima)
    heads = [chapter_column(n) for n in chapters]

    def cells(who: str) -> list[object]:
        mine = points.get(who, {})
        return [float(mine[n]) if n in mine else "" for n in chapters]

    plain = [["learner", *heads]] + [[who, *cells(who)] for who in learners]
    canvas = ([["Student", "SIS Login ID", "Section", *heads],
               ["Points Possible", "", "", *[float(maxima.get(n, 0.0)) for n in chapters]]]
              + [[who, who, "", *cells(who)] for who in learners])
    return [_write(out / "lms.csv", plain), _write(out / "lms_canvas.csv", canvas)]
