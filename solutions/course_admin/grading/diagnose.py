"""A learner's rows of one chapter, revised once every case of it is judged: messages that blame the right thing.

The rules are course_lib/provided/diagnosis.py's, the same `course check` applies; here they run on the rows
``verdict.judge_case`` left (``JudgedRow``: the names each gave, and a way to judge it again) and on the evidence
plan.py stored with the prepared chapter (by case: the known mistakes that fail it, the chapters it runs):

* ``revise``: a known mistake a passed case of the chapter rules out is named nowhere (the case is judged again
  without it); a failure a mistake named on another case explains says so in one line.
* ``prerequisite_notes``: "fix chapter NN first" heads a failed case only when chapter NN fails its own checks,
  the learner's code imports it (uses.py, read from the submitted bytes) and the case's computation runs its
  code (traced on the reference, plan.py).

A hidden case's message stays free of learner-chosen text: what is added is the grader's own line, a case's
label and the spec's texts of known mistakes. Nothing here runs learner code.
"""
from __future__ import annotations

from course_lib.provided import chapters as chapters_mod
from course_lib.provided import diagnosis, uses

from ..records.rows import GradeRow
from .plan import Chapter
from .verdict import JudgedRow


def _report(chapter: Chapter, rows: list[GradeRow]) -> list[diagnosis.Judged]:
    return [diagnosis.Judged(r.component, r.status == "pass", r.names if isinstance(r, JudgedRow) else (),
                             isinstance(r, JudgedRow) and r.explainable, chapter.fails[g.index])
            for g, r in zip(chapter.cases, rows)]


def plain(rows: list[GradeRow]) -> list[GradeRow]:
    """``rows`` as GradeRows alone (what a JudgedRow carries besides is for this module only)."""
    return [r.plain() if isinstance(r, JudgedRow) else r for r in rows]


def revise(chapter: Chapter, rows: list[GradeRow]) -> list[GradeRow]:
    """``rows`` (one per case of ``chapter``, in order) with the report-wide rules applied (module docstring),
    as plain GradeRows. Rows that do not fit the chapter's cases, or a chapter without the evidence, are left."""
    if len(rows) != len(chapter.cases) or len(chapter.fails) < len(chapter.inputs):
        return plain(rows)
    ruled = diagnosis.ruled_out(_report(chapter, rows))
    rows = [r.again(ruled) if isinstance(r, JudgedRow) and r.again and r.status != "pass" and ruled & set(r.names)
            else r for r in rows]
    report = _report(chapter, rows)
    for i, k in diagnosis.explainers(report).items():
        rows[i] = rows[i].with_message(diagnosis.explained(rows[i].message, report[k].label))
    return plain(rows)


def prerequisite_notes(chapter: Chapter, rows: list[GradeRow], earlier: dict[str, list[GradeRow]],
                       source: uses.Source) -> list[GradeRow]:
    """Head each failed check of ``chapter`` with the prerequisites of the learner's that fail their own, that the
    learner's code imports (``source``: a module's submitted bytes, read here, never run) and whose code the
    check runs (``Chapter.runs``; every failed check when that is not known)."""
    failing = chapters_mod.failing_prerequisites(chapter.prereqs, uses.used_chapters(chapter.number, source),
                                                 lambda p: earlier.get(p, []))
    if not failing:
        return rows
    known = len(rows) == len(chapter.cases) and len(chapter.runs) >= len(chapter.inputs)
    runs = [chapter.runs[g.index] for g in chapter.cases] if known else [None] * len(rows)
    out = []
    for r, ran in zip(rows, runs):
        note = chapters_mod.prereq_note(chapter.number, failing, ran)
        out.append(r.with_message(f"{note} [{r.message}]") if note and r.status != "pass" else r)
    return out
