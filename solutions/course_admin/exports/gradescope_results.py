"""Gradescope's results.json from the rows `course grade` wrote, in the format of Gradescope's autograder
specification (gradescope-autograders.readthedocs.io, "Output format"):

    {"score": total, "execution_time": s, "output": text for the whole submission, "output_format": "text",
     "stdout_visibility": "hidden",
     "tests": [{"name", "number", "score", "max_score", "status": "passed"|"failed", "output",
                "output_format": "text", "tags", "visibility"}]}

With a chapter 08 submission that carries a trained model, its rows are tests too (the grader's measured
accuracy, visible) and the top-level ``"leaderboard"`` of Gradescope's leaderboards page lists the
measured test accuracy, its standard error and the parameters counted from the weights, beside what the
run's summary says (minutes, device, pretrained: marked claimed), all from the typed fields the grader wrote
beside its measured row (trained.entry), never from a message.

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

from course_lib.provided.i18n import _, check_name
from course_lib.provided.layout import SpecError, chapter_facts

from ..intake.submissions import IDENTITY_WARNING
from ..grading import trained
from ..records.rows import NAMES, GradeRow
from .class_summary import HIDDEN_PREFIX

Table = list[tuple[str, GradeRow]]
ISOLATION = {"bwrap": "in bubblewrap's sandbox", "rlimits": "under rlimits only (no sandbox)", "none": "nowhere"}


def _chapter(number: str) -> str:
    """A chapter as the learner reads it: 'ch02 Attention' (lms.chapter_column), its title in the learner's language."""
    try:
        return f"ch{number} {_(chapter_facts(number).title)}"
    except (SpecError, ValueError):
        return f"ch{number}"


def _test(row: GradeRow, number: str, several: bool) -> dict:
    hidden = row.component.startswith(HIDDEN_PREFIX)
    shown = check_name(row.component, NAMES)  # the learner's language; the grade table keeps the English
    name = f"ch{row.chapter} {shown}" if several else shown
    passed = row.status == "pass"
    return {"name": name, "number": number, "score": float(row.points), "max_score": float(row.max_points),
            "status": "passed" if passed else "failed",
            "output": row.message or (_("passed") if passed else _(row.status)),
            "output_format": "text", "tags": [f"ch{row.chapter}", "hidden" if hidden else "public"],
            "visibility": "after_published" if hidden else "visible"}


def results(table: Table, numbers: list[str], seconds: float, warnings: tuple[str, ...] = ()) -> dict:
    """results.json of one submission: ``table`` holds the rows of one learner; ``warnings`` are the
    upload's, found by run() (e.g. a zip packed for another chapter)."""
    learners = sorted({who for who, _row in table})
    if len(learners) != 1:
        found = (_("{count} submissions ({learners})").format(count=len(learners), learners=", ".join(learners))
                 if learners else _("no submission"))  # never one: len(learners) != 1
        return failure(_("{found} for chapter(s) {numbers} in the upload").format(found=found,
                                                                                  numbers=", ".join(numbers)),
                       _("Upload the one zip `make submit CH={chapter}` wrote, or its files: course_lib/ with your "
                         "modules, the chapter's notebook and manifest.json").format(chapter=numbers[0]))
    rows = [r for _who, r in table]
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
        line = _("{chapter}: {got} / {possible} points from the {count} visible checks of course_lib.").format(
            chapter=_chapter(n), got=f"{sum(r.points for r in shown):g}",
            possible=f"{sum(r.max_points for r in shown):g}", count=len(shown))
        if hidden:
            line += _(" {count} hidden checks ({points} points) are graded too: you see them, and your total, once "
                      "your instructor publishes the grades.").format(
                count=hidden, points=f"{sum(r.max_points for r in mine) - sum(r.max_points for r in shown):g}")
        lines.append(line)
        lines += [_("{chapter}: {got} / {possible} points for the {component}: {message}").format(
                      chapter=_chapter(n), got=f"{r.points:g}", possible=f"{r.max_points:g}",
                      component=check_name(r.component, NAMES),
                      message=r.message)
                  for r in model if r.chapter == n and r.component == trained.COMPONENT]
    lines.append(_("Written answers in the notebook are graded by hand, apart from this score."))
    lines += [_("Warning: {warning}").format(warning=w) for w in warnings]
    lines += [_("Warning: {warning}").format(warning=r.message) for r in rows
              if r.kind == "submission" and not r.component.startswith(IDENTITY_WARNING)]  # the row's English key
    isolation = sorted({r.isolation for r in graded} - {"none"})
    note = f"rows graded {', '.join(ISOLATION.get(i, i) for i in isolation) or 'nowhere'}"
    out = {"score": float(sum(t["score"] for t in tests)), "execution_time": round(seconds, 1),
           "output": "\n".join(lines), "output_format": "text", "stdout_visibility": "hidden", "tests": tests,
           "instructor": [note]}
    board = trained.entry(model)
    if board is not None:  # Gradescope's leaderboard: pseudonyms the learners choose, these columns
        # the columns' names and the yes/no in the learner's language (the class sees the page in one)
        out["leaderboard"] = [{"name": _("Test accuracy"), "value": round(board["accuracy"], 3)},
                              {"name": _("± 1 SE"), "value": round(board["se"], 3), "order": "asc"},
                              {"name": _("Parameters"), "value": board["parameters"], "order": "asc"},
                              {"name": _("Training minutes (claimed)"),
                               "value": round(board["minutes"], 1) if board["minutes"] is not None else "?",
                               "order": "asc"},
                              {"name": _("Device (claimed)"), "value": board["device"]},
                              {"name": _("Pretrained (claimed)"), "value": _("yes") if board["pretrained"] else _("no")}]
    return out


def failure(what: str, fix: str = "") -> dict:
    """results.json when nothing could be graded: score 0 and a sentence saying what happened and the fix."""
    what, fix = what.strip().rstrip("."), fix.strip().rstrip(".")  # each sentence ends with one full stop
    text = (_("Not graded: {what}. {fix}.") if fix else _("Not graded: {what}.")).format(what=what, fix=fix)
    return {"score": 0.0, "output": text, "output_format": "text", "stdout_visibility": "hidden", "tests": []}


def write_results(path: Path, data: dict) -> None:
    """Write ``data`` to ``path`` whole (a temporary file, then a rename)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
