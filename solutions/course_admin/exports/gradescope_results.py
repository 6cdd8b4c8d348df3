"""Gradescope's results.json from the rows `course grade` wrote, in the format of Gradescope's autograder
specification (gradescope-autograders.readthedocs.io, "Output format"):

    {"score": total, "execution_time": s, "output": text for the whole submission, "output_format": "text",
     "stdout_visibility": "hidden",
     "tests": [{"name", "number", "score", "max_score", "status": "passed"|"failed", "output",
                "output_format": "text", "tags", "visibility"}]}

One test per graded case; a hidden case has ``"visibility": "after_published"`` (the learner sees it once
the instructor publishes the grades), every other ``"visible"``. Its output is the row's message, which
for a hidden case never carries text the learner's code produced (verdict.py). The whole submission's
output names the chapter totals, the isolation the code ran under and the warnings about the submission.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..records.lms import chapter_column
from ..records.rows import GradeRow
from .class_summary import HIDDEN_PREFIX

Table = list[tuple[str, GradeRow]]
ISOLATION = {"bwrap": "in bubblewrap's sandbox", "rlimits": "under rlimits only (no sandbox)", "none": "nowhere"}


def _test(row: GradeRow, number: str, several: bool) -> dict:
    hidden = row.component.startswith(HIDDEN_PREFIX)
    name = f"ch{row.chapter} {row.component}" if several else row.component
    passed = row.status == "pass"
    return {"name": name, "number": number, "score": float(row.points), "max_score": float(row.max_points),
            "status": "passed" if passed else "failed", "output": row.message or ("passed" if passed else row.status),
            "output_format": "text", "tags": [f"ch{row.chapter}", "hidden" if hidden else "public"],
            "visibility": "after_published" if hidden else "visible"}


def results(table: Table, numbers: list[str], seconds: float) -> dict:
    """results.json of one submission: ``table`` holds the rows of one learner."""
    learners = sorted({who for who, _ in table})
    if len(learners) != 1:
        found = f"{len(learners)} submissions ({', '.join(learners)})" if learners else "no submission"
        return failure(f"{found} for chapter(s) {', '.join(numbers)} in the upload",
                       "Upload the one zip `make submit CH=NN` wrote, or its files: course_lib/ with your "
                       "modules, the chapter's notebook and manifest.json")
    rows = [r for _, r in table]
    graded = [r for r in rows if r.kind == "course_lib"]
    several = len({r.chapter for r in graded}) > 1
    tests, counters = [], {}
    for r in graded:
        counters[r.chapter] = counters.get(r.chapter, 0) + 1
        tests.append(_test(r, f"{int(r.chapter)}.{counters[r.chapter]}", several))
    lines = []
    for n in numbers:
        mine = [r for r in graded if r.chapter == n]
        hidden = sum(r.component.startswith(HIDDEN_PREFIX) for r in mine)
        lines.append(f"{chapter_column(n)}: {sum(r.points for r in mine):g} / {sum(r.max_points for r in mine):g} "
                     f"points from the course_lib checks; {hidden} of the {len(mine)} checks are hidden and are "
                     "shown once the grades are published.")
    isolation = sorted({r.isolation for r in graded} - {"none"})
    lines.append(f"Your code ran {', '.join(ISOLATION.get(i, i) for i in isolation) or 'nowhere'}. "
                 "Written answers in the notebook are graded by hand, apart from this score.")
    lines += [f"Warning: {r.message}" for r in rows if r.kind == "submission"]
    return {"score": float(sum(t["score"] for t in tests)), "execution_time": round(seconds, 1),
            "output": "\n".join(lines), "output_format": "text", "stdout_visibility": "hidden", "tests": tests}


def failure(what: str, fix: str = "") -> dict:
    """results.json when nothing could be graded: score 0 and a sentence saying what happened and the fix."""
    text = f"Not graded: {what}." + (f" {fix}." if fix else "")
    return {"score": 0.0, "output": text, "output_format": "text", "stdout_visibility": "hidden", "tests": []}


def write_results(path: Path, data: dict) -> None:
    """Write ``data`` to ``path`` whole (a temporary file, then a rename)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
