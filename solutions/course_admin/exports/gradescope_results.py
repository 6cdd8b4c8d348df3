"""Gradescope's results.json from the rows `course grade` wrote, in the format of Gradescope's autograder
specification (gradescope-autograders.readthedocs.io, "Output format"):

    {"score": total, "execution_time": s, "output": text for the whole submission, "output_format": "text",
     "stdout_visibility": "hidden",
     "tests": [{"name", "number", "score", "max_score", "status": "passed"|"failed", "output",
                "output_format": "text", "tags", "visibility"}]}

With a chapter 08 submission that carries a trained model, its rows are tests too (the grader's measured
accuracy, visible) and the top-level ``"leaderboard"`` of Gradescope's leaderboards page lists the
measured test accuracy, its standard error and the parameters counted from the weights, beside what the
run's summary says (minutes, device, pretrained: marked claimed).

One test per graded case; a hidden case has ``"visibility": "after_published"`` (the learner sees it once
the instructor publishes the grades), every other ``"visible"``. Its output is the row's message, which
for a hidden case never carries text the learner's code produced (verdict.py).

The whole submission's ``output`` is what the learner reads before the grades are published, so it
speaks of the visible checks' points only (Gradescope itself hides the total score while a test is
hidden): never a total with the hidden cases in it. It carries the warnings about the submission that
are really wrong there; whose upload it is, is Gradescope's to say, so the manifest naming another
learner is no warning. What the instructor alone should read (the isolation used) is returned under
``"instructor"``, which run() prints to run_autograder's output and takes out of results.json.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..intake.submissions import IDENTITY_WARNING
from ..records.lms import chapter_column
from ..grading import trained
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


def results(table: Table, numbers: list[str], seconds: float, warnings: tuple[str, ...] = ()) -> dict:
    """results.json of one submission: ``table`` holds the rows of one learner; ``warnings`` are the
    upload's, found by run() (e.g. a zip packed for another chapter)."""
    learners = sorted({who for who, _ in table})
    if len(learners) != 1:
        found = f"{len(learners)} submissions ({', '.join(learners)})" if learners else "no submission"
        return failure(f"{found} for chapter(s) {', '.join(numbers)} in the upload",
                       f"Upload the one zip `make submit CH={numbers[0]}` wrote, or its files: course_lib/ with "
                       "your modules, the chapter's notebook and manifest.json")
    rows = [r for _, r in table]
    graded = [r for r in rows if r.kind == "course_lib"]
    model = [r for r in rows if r.kind == trained.KIND]  # chapter 08's trained model, measured by the grader
    several = len({r.chapter for r in graded + model}) > 1
    tests, counters = [], {}
    for r in graded + model:
        counters[r.chapter] = counters.get(r.chapter, 0) + 1
        tests.append(_test(r, f"{int(r.chapter)}.{counters[r.chapter]}", several))
    lines = []
    for n in numbers:
        mine = [r for r in graded if r.chapter == n]
        shown = [r for r in mine if not r.component.startswith(HIDDEN_PREFIX)]
        hidden = len(mine) - len(shown)
        line = (f"{chapter_column(n)}: {sum(r.points for r in shown):g} / {sum(r.max_points for r in shown):g} "
                f"points from the {len(shown)} visible checks of course_lib.")
        if hidden:
            line += (f" {hidden} hidden checks ({sum(r.max_points for r in mine) - sum(r.max_points for r in shown):g}"
                     " points) are graded too: you see them, and your total, once your instructor publishes the "
                     "grades.")
        lines.append(line)
        lines += [f"{chapter_column(n)}: {r.points:g} / {r.max_points:g} points for the {r.component}: {r.message}"
                  for r in model if r.chapter == n and r.component == trained.COMPONENT]
    lines.append("Written answers in the notebook are graded by hand, apart from this score.")
    lines += [f"Warning: {w}" for w in warnings]
    lines += [f"Warning: {r.message}" for r in rows
              if r.kind == "submission" and not r.message.startswith(IDENTITY_WARNING)]
    isolation = sorted({r.isolation for r in graded} - {"none"})
    note = f"rows graded {', '.join(ISOLATION.get(i, i) for i in isolation) or 'nowhere'}"
    out = {"score": float(sum(t["score"] for t in tests)), "execution_time": round(seconds, 1),
           "output": "\n".join(lines), "output_format": "text", "stdout_visibility": "hidden", "tests": tests,
           "instructor": [note]}
    board = trained.entry(model)
    if board is not None:  # Gradescope's leaderboard: pseudonyms the learners choose, these columns
        out["leaderboard"] = [{"name": "Test accuracy", "value": round(board["accuracy"], 3)},
                              {"name": "± 1 SE", "value": round(board["se"], 3), "order": "asc"},
                              {"name": "Parameters", "value": board["parameters"], "order": "asc"},
                              {"name": "Training minutes (claimed)",
                               "value": board["minutes"] if board["minutes"] is not None else "?", "order": "asc"},
                              {"name": "Device (claimed)", "value": board["device"]},
                              {"name": "Pretrained (claimed)", "value": "yes" if board["pretrained"] else "no"}]
    return out


def failure(what: str, fix: str = "") -> dict:
    """results.json when nothing could be graded: score 0 and a sentence saying what happened and the fix."""
    what, fix = what.strip().rstrip("."), fix.strip().rstrip(".")  # each sentence ends with one full stop
    text = f"Not graded: {what}." + (f" {fix}." if fix else "")
    return {"score": 0.0, "output": text, "output_format": "text", "stdout_visibility": "hidden", "tests": []}


def write_results(path: Path, data: dict) -> None:
    """Write ``data`` to ``path`` whole (a temporary file, then a rename)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
