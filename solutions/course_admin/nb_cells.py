"""The pure parts of notebook grading: what the instructor's notebook asks, what the learner's holds.

* ``grade_plan`` and ``hidden_lines`` read the instructor's source notebook: the graded cells and their
  points, and the lines of its hidden tests.
* ``scrub`` makes a message safe to show: no ANSI colours, no line of a hidden test, a bounded length.
* ``load_learner_notebook`` parses the submitted file and rebuilds it from what grading needs (cell type,
  source, grade_id), so that odd metadata never reaches nbgrader.
* ``reconcile`` makes the learner's notebook carry every nbgrader cell of the release, with its metadata.
* ``cell_result`` turns one nbgrader grade and its executed cell into points, a status and a message.

Nothing here starts a process; ``nbformat`` is imported only where a notebook is converted or validated.
"""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

MESSAGE_LIMIT = 600
HIDDEN_LINE = "[a line of a hidden test]"


# ------------------------------------------------------------------------- the instructor's notebook
def grade_plan(source_nb: dict) -> list[tuple[str, float, bool]]:
    """[(grade_id, max_points, is_manual)] of the graded cells, in notebook order."""
    plan = []
    for cell in source_nb.get("cells", []):
        meta = (cell.get("metadata") or {}).get("nbgrader") or {}
        if meta.get("grade") and meta.get("grade_id"):
            plan.append((str(meta["grade_id"]), float(meta.get("points", 0)),
                         bool(meta.get("solution")) or cell.get("cell_type") != "code"))
    return plan


def hidden_lines(source_nb: dict) -> set[str]:
    """Every non-trivial line inside a BEGIN/END HIDDEN TESTS block of the source notebook."""
    lines: set[str] = set()
    for cell in source_nb.get("cells", []):
        src = cell.get("source", "")
        src = "".join(src) if isinstance(src, list) else str(src)
        inside = False
        for line in src.splitlines():
            if "BEGIN HIDDEN TESTS" in line:
                inside = True
            elif "END HIDDEN TESTS" in line:
                inside = False
            elif inside and len(line.strip()) >= 6:
                lines.add(line.strip())
    return lines


def scrub(message: str | None, hidden: set[str]) -> str:
    """Drop ANSI colours, any line that quotes a hidden test, and cap the length."""
    message = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", message or "")
    kept = [HIDDEN_LINE if any(h in line for h in hidden) else line for line in message.splitlines()]
    message = "\n".join(kept).strip()
    if len(message) > MESSAGE_LIMIT:
        message = message[:MESSAGE_LIMIT] + " …"
    return message


def tail(text: str, n: int = 800) -> str:
    """The last ``n`` characters of a log, or "(no log)"."""
    text = text.strip()
    return text[-n:] if text else "(no log)"


# ----------------------------------------------------------------------------- the learner's notebook
def load_learner_notebook(path: Path) -> tuple[dict | None, str]:
    """Parse the learner's notebook and rebuild it from what grading needs: cell type, source, grade_id.

    Returns (notebook, "") or (None, the reason for the learner)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return None, f"the notebook could not be read ({exc.strerror or exc})"
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, (f"the notebook is not valid JSON ({exc}); it was probably edited as text or saved "
                      "half-way. Open it in Jupyter, save it again and resubmit")
    if isinstance(data, dict) and data.get("nbformat") == 3:
        try:
            import nbformat
            data = json.loads(nbformat.writes(nbformat.reads(raw.decode("utf-8"), as_version=4)))
        except Exception as exc:  # noqa: BLE001 - whatever nbformat makes of a broken old notebook
            return None, f"the notebook uses the old format 3 and could not be converted ({exc})"
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        return None, "the file is JSON but not a Jupyter notebook (no list of cells)"
    cells = [new for i, cell in enumerate(data["cells"]) if (new := _rebuild_cell(i, cell)) is not None]
    nb = {"nbformat": 4, "nbformat_minor": 5, "cells": cells,
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                       "language_info": {"name": "python"}}}
    return nb, ""


def _rebuild_cell(i: int, cell: Any) -> dict | None:
    """A clean nbformat 4.5 cell from a learner's cell: its type, source and grade_id; None if unusable."""
    if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw"):
        return None
    kind = cell["cell_type"]
    src = cell.get("source", "")
    if isinstance(src, list):
        src = "".join(s for s in src if isinstance(s, str))
    elif not isinstance(src, str):
        src = ""
    meta = cell.get("metadata") if isinstance(cell.get("metadata"), dict) else {}
    nbg = meta.get("nbgrader") if isinstance(meta.get("nbgrader"), dict) else {}
    gid = nbg.get("grade_id") if isinstance(nbg.get("grade_id"), str) else None
    new: dict[str, Any] = {"cell_type": kind, "id": f"c{i:04d}", "metadata": {}, "source": src}
    if gid:
        new["metadata"]["nbgrader"] = {"grade_id": gid}
    if kind == "code":
        new.update(outputs=[], execution_count=None)
    return new


# ------------------------------------------------------------------------------------- reconciliation
def _gid(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def _normalised(source: str) -> list[str]:
    return [line.rstrip() for line in source.splitlines() if line.strip()]


def _grade_index(cells) -> dict[str, int]:
    return {gid: i for i, c in enumerate(cells) if (gid := _gid(c))}


def reconcile(learner, release) -> dict[str, str]:
    """Make the learner's notebook (nbformat nodes, changed in place) carry every nbgrader cell of the
    release, with the release's metadata.

    Instructor cells (tests, locked text) get the release source back (OverwriteCells then restores the
    hidden tests); missing ones are reinserted after the nearest earlier nbgrader cell that is present.
    Learner cells (solution code and written answers) keep the learner's source. An unknown or repeated
    grade_id makes an ordinary cell. Returns a note per grade_id for the learner's feedback.
    """
    import nbformat

    wanted = [c for c in release.cells if _gid(c)]
    _demote_unknown(learner, {_gid(c) for c in wanted})
    notes: dict[str, str] = {}
    for n, ref in enumerate(wanted):
        index = _grade_index(learner.cells)
        gid = _gid(ref)
        if gid in index:
            note = _reset(learner.cells[index[gid]], ref)
        else:
            earlier = next((index[e] for e in map(_gid, reversed(wanted[:n])) if e in index), -1)
            note = _restore(learner, ref, earlier + 1)  # after the nearest earlier one still present
        if note and ref.metadata.nbgrader.get("grade"):
            notes[gid] = note
    for cell in learner.cells:  # nbformat 4.5 wants unique cell ids
        cell.pop("id", None)
    learner.nbformat_minor = 4
    nbformat.validate(learner)
    return notes


def _demote_unknown(learner, wanted_ids: set[str]) -> None:
    """A grade_id the release does not have, or a second cell with one, makes an ordinary cell."""
    seen: set[str] = set()
    for cell in learner.cells:
        gid = _gid(cell)
        if gid and (gid not in wanted_ids or gid in seen):
            cell.metadata.pop("nbgrader", None)
        elif gid:
            seen.add(gid)


def _reset(cell, ref) -> str:
    """Give a present cell the release's metadata and type, and an instructor cell its source back."""
    note = ""
    if not ref.metadata.nbgrader.get("solution") and _normalised(cell.source) != _normalised(ref.source):
        note = "You had edited this test cell; it was graded as the course wrote it."
        cell.source = ref.source
    if cell.cell_type != ref.cell_type:
        cell.cell_type = ref.cell_type
        if ref.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        else:
            cell.pop("outputs", None)
            cell.pop("execution_count", None)
    cell.metadata = copy.deepcopy(ref.metadata)
    return note


def _restore(learner, ref, pos: int) -> str:
    """Insert the release's copy of a missing cell at ``pos``."""
    new = copy.deepcopy(ref)
    if new.cell_type == "code":
        new.outputs, new.execution_count = [], None
    learner.cells.insert(pos, new)
    return ("This cell was missing from your notebook; it was restored from the course's copy"
            + (" (your answer there is empty)." if ref.metadata.nbgrader.get("solution") else "."))


# ---------------------------------------------------------------------------------------- a cell's grade
def _join(a: str, b: str) -> str:
    return " ".join(x for x in (a.strip(), b.strip()) if x)


def cell_result(grade, cell, note: str) -> dict:
    """Points, status and message of one graded cell, from nbgrader's ``Grade`` and the executed cell."""
    max_points = float(grade.max_score)
    auto = grade.auto_score
    if cell is not None and cell.cell_type != "code":
        if auto is not None and not grade.needs_manual_grade:
            return {"points": float(auto), "status": "fail" if auto < max_points else "pass",
                    "message": _join(note, "no answer was written")}
        return {"points": float(grade.manual_score or 0.0), "status": "needs manual grading",
                "message": _join(note, "written answer: graded by hand")}
    if auto is None:
        return {"points": 0.0, "status": "needs manual grading", "message": _join(note, "graded by hand")}
    points = float(auto)
    errors = [o for o in (cell.outputs if cell is not None else []) if o.get("output_type") == "error"]
    if errors:
        ename, evalue = errors[-1].get("ename", "Error"), str(errors[-1].get("evalue", "")).strip()
        msg = f"{ename}: {evalue}" if evalue else f"{ename} (no message)"
    elif points < max_points:
        msg = f"{points:g} of {max_points:g} points: the test reported partial credit"
    else:
        msg = ""
    return {"points": points, "status": "pass" if points >= max_points else "fail", "message": _join(note, msg)}
