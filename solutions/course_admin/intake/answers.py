"""The notebook half of `course grade`: a chapter notebook's written answers, read as data, never run.

The exercise notebook is the learner's workbook: its code cells (their own figures and experiments,
and the public self-checks) run on the learner's machine. Nothing of it runs on the grader's, so
nothing in it can decide a point: every automatic point comes from the sandboxed course_lib grading
(sandboxed.py), and the written answers are graded by hand in nbgrader's formgrader
(`course grade --manual` merges those scores into the one table).

For each written-answer cell of the chapter's source notebook this gives one row:

    needs manual grading   the learner wrote an answer (0 points until graded by hand)
    fail                   the cell still holds the release's placeholder, is empty, or was deleted

`course release` refuses a source notebook with an automatically graded code cell (auto_graded()),
since its points would be decided by code that runs where the learner's code runs.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from course_lib.provided.i18n import _
from course_lib.provided.layout import LAYOUT, Layout
from course_lib.provided.preflight import PLACEHOLDERS

MAX_NOTEBOOK_BYTES = 20 * 1024**2


@dataclass(frozen=True)
class Answer:
    grade_id: str
    max_points: float
    status: str      # "needs manual grading" or "fail"
    message: str


def _meta(cell: dict) -> dict:
    meta = cell.get("metadata") if isinstance(cell.get("metadata"), dict) else {}
    nbgrader = meta.get("nbgrader")
    return nbgrader if isinstance(nbgrader, dict) else {}


def _text(cell: dict) -> str:
    source = cell.get("source", "")
    if isinstance(source, list):
        return "".join(s for s in source if isinstance(s, str))
    return source if isinstance(source, str) else ""


def notebook_of(folder: Path) -> Path | None:
    found = sorted(p for p in folder.glob("*.ipynb") if not p.name.startswith(".")) if folder.is_dir() else []
    return found[0] if found else None


def written_answers(source: dict) -> list[tuple[str, float]]:
    """[(grade_id, points)] of the cells graded by hand: answers the learner writes."""
    return [(str(_meta(c)["grade_id"]), float(_meta(c).get("points", 0))) for c in source.get("cells", [])
            if _meta(c).get("grade") and _meta(c).get("grade_id")
            and (_meta(c).get("solution") or c.get("cell_type") != "code")]


def auto_graded(source: dict) -> list[str]:
    """grade_ids of automatically graded code cells (tests): their points would be decided in the
    learner's kernel, so the course has none."""
    return [str(_meta(c).get("grade_id")) for c in source.get("cells", [])
            if _meta(c).get("grade") and c.get("cell_type") == "code" and not _meta(c).get("solution")]


def released_cells(number: str, layout: Layout = LAYOUT) -> dict[str, str]:
    """{grade_id: source} of the chapter's released notebook (what the learner started from)."""
    name = layout.exercise_name(number)
    path = notebook_of(layout.exercises / name) if name else None
    if path is None:
        return {}
    cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
    return {str(_meta(c)["grade_id"]): _text(c) for c in cells if _meta(c).get("grade_id")}


def source_answers(number: str, layout: Layout = LAYOUT) -> list[tuple[str, float]]:
    name = layout.exercise_name(number)
    path = notebook_of(layout.sources / name) if name else None
    if path is None:
        return []
    return written_answers(json.loads(path.read_text(encoding="utf-8")))


def _learner_cells(data: bytes) -> dict[str, str] | str:
    """{grade_id: text} of the learner's notebook, or why it cannot be read."""
    try:
        notebook = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return _("the notebook is not valid JSON ({error}); open it in Jupyter, save it again and hand it in "
                 "again").format(error=f"{type(exc).__name__}: {str(exc)[:120]}")
    except RecursionError:
        return _("the notebook could not be read: its JSON is nested too deeply (no Jupyter notebook is); open it "
                 "in Jupyter, save it again and hand it in again")
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        return _("the file is not a Jupyter notebook (no list of cells)")
    found: dict[str, str] = {}
    for cell in notebook["cells"]:
        if isinstance(cell, dict) and isinstance(_meta(cell).get("grade_id"), str):
            found.setdefault(_meta(cell)["grade_id"], _text(cell))
    return found


def _normalised(text: str) -> str:
    return " ".join(text.split())


def read_answers(data: bytes, number: str, layout: Layout = LAYOUT) -> list[Answer]:
    """One Answer per written-answer cell of chapter ``number``; never raises for what the file holds."""
    wanted = source_answers(number, layout)
    if len(data) > MAX_NOTEBOOK_BYTES:
        cells: dict[str, str] | str = _("the notebook is larger than {limit} MiB").format(
            limit=MAX_NOTEBOOK_BYTES // 1024**2)
    else:
        cells = _learner_cells(data)
    if isinstance(cells, str):
        return [Answer(gid, points, "fail", cells) for gid, points in wanted]
    released = released_cells(number, layout)
    unanswered = {_normalised(p) for p in PLACEHOLDERS}  # every edition's (在此作答 in a Chinese notebook)
    answers = []
    for gid, points in wanted:
        text = cells.get(gid)
        if text is None:
            answers.append(Answer(gid, points, "fail", _("this answer cell is missing from your notebook")))
        elif not text.strip() or _normalised(text) in {_normalised(released.get(gid, "")), *unanswered}:
            answers.append(Answer(gid, points, "fail", _("no answer was written")))
        else:
            answers.append(Answer(gid, points, "needs manual grading", _("written answer: graded by hand")))
    return answers
