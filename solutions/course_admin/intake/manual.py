"""Written answers graded by hand in nbgrader's formgrader, read back for `course grade --manual`.

formgrader keeps its scores in nbgrader's own gradebook (``grades/gradebook.db`` with the root
``nbgrader_config.py``). For every submitted notebook cell that needs a human (a written answer),
the grader takes the score once an instructor has given one; cells still waiting stay
"needs manual grading" in the table.
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

ManualScore = tuple[str, str, str, float, float]  # learner, chapter "02", grade_id, points, max_points


def read_manual_scores(db: Path) -> list[ManualScore]:
    """Hand-given scores of written answers from an nbgrader gradebook (SQLite file)."""
    if not db.is_file():
        raise FileNotFoundError(f"--manual: no nbgrader gradebook at {db}; it is the gradebook formgrader "
                                "writes (with the repository's nbgrader_config.py: grades/gradebook.db)")
    from nbgrader.api import Gradebook

    # nbgrader runs the `alembic` command by name when it opens a gradebook: let it find the venv's.
    bindir = str(Path(sys.executable).parent)
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
    scores: list[ManualScore] = []
    with Gradebook(f"sqlite:///{db.resolve()}") as gb:
        for assignment in gb.assignments:
            match = re.match(r"ch(\d{2})(?:_|$)", assignment.name)
            if not match:
                continue
            for notebook in assignment.notebooks:
                for submission in gb.notebook_submissions(notebook.name, assignment.name):
                    for grade in submission.grades:
                        if grade.auto_score is not None or grade.manual_score is None or grade.needs_manual_grade:
                            continue  # autograded, or not graded by hand yet
                        scores.append((submission.student.id, match.group(1), grade.name,
                                       float(grade.manual_score) + float(grade.extra_credit or 0.0),
                                       float(grade.max_score)))
    return sorted(scores)
