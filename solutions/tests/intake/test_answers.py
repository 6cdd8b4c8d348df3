"""The notebook half of `course grade` reads written answers as data and runs nothing (answers.py)."""
from __future__ import annotations

import json

import nbformat
import pytest

from course_admin.intake.answers import auto_graded, read_answers, source_answers, written_answers
from course_lib.provided.layout import LAYOUT

RELEASE = LAYOUT.exercises / "ch02_attention" / "ch02_attention.ipynb"
pytestmark = pytest.mark.skipif(not RELEASE.is_file(), reason="chapter 02 has not been released")


def notebook(answer: str | None = None, drop: str | None = None) -> bytes:
    """The released notebook with every written answer set to ``answer`` and the cell ``drop`` deleted."""
    nb = nbformat.read(RELEASE, as_version=4)
    cells = []
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid and gid == drop:
            continue
        if gid and answer is not None and gid in dict(source_answers("02")):
            cell.source = answer
        cells.append(cell)
    nb.cells = cells
    return nbformat.writes(nb).encode()


def test_chapter_02_has_a_written_answer_and_no_auto_graded_cell() -> None:
    source = json.loads(next((LAYOUT.sources / "ch02_attention").glob("*.ipynb")).read_text())
    assert written_answers(source) and auto_graded(source) == []


def test_a_written_answer_waits_for_the_instructor() -> None:
    answers = read_answers(notebook("Dividing by √d_k keeps the variance of the scores at 1."), "02")
    assert [(a.grade_id, a.status, a.max_points) for a in answers] == [
        (gid, "needs manual grading", points) for gid, points in source_answers("02")]


@pytest.mark.parametrize("data", [notebook(), notebook("   \n"), notebook("在此作答"), notebook(drop="answer-sqrt-dk"),
                                  b"{not json",
                                  b'{"cells": 3}', b"\xff\xfe", b" " * (20 * 1024**2 + 1)])
def test_nothing_written_scores_nothing(data: bytes) -> None:
    answers = read_answers(data, "02")
    assert answers and all(a.status == "fail" and a.message for a in answers)


def test_a_deleted_answer_cell_is_named() -> None:
    answers = {a.grade_id: a for a in read_answers(notebook("An answer.", drop="answer-sqrt-dk"), "02")}
    assert answers["answer-sqrt-dk"].message == "this answer cell is missing from your notebook"
    assert answers["answer-heatmap"].status == "needs manual grading"


def test_code_in_the_notebook_is_never_run(tmp_path) -> None:
    marker = tmp_path / "ran"
    nb = nbformat.read(RELEASE, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(f"open({str(marker)!r}, 'w').write('x')"))
    read_answers(nbformat.writes(nb).encode(), "02")
    assert not marker.exists()


def test_an_auto_graded_cell_is_found() -> None:
    planted = {"cells": [{"cell_type": "code", "source": "assert True",
                          "metadata": {"nbgrader": {"grade": True, "solution": False, "grade_id": "t", "points": 1}}}]}
    assert auto_graded(planted) == ["t"] and written_answers(planted) == []
