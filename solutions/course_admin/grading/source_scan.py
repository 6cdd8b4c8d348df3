"""A chapter's ready-made cases ("built from scratch"), decided here, in the grader's own process.

A spec's ``READY_MADE`` ({module file: PyTorch names}) becomes one case (``checking.ready_made_case``)
that reads the learner's source instead of running it. The sandboxed child runs nothing for it; its
row is replaced by a static scan (``checking.judge_source``, the same as `course check`'s) of the bytes
the submission holds, never of what the sandbox saw. It earns its points when those files use none of
the names and at least one other public case of the chapter passed. Nothing of the learner's runs for
this row, so its isolation is "none".
"""
from __future__ import annotations

from course_lib.provided.checking import judge_source

from ..intake.submissions import Reader, SubmissionError
from ..records.rows import GradeRow
from .plan import Chapter


def submitted_source(reader: Reader, module: str) -> bytes | None:
    """The submitted bytes of ``course_lib/<module>``; None when the submission lacks or cannot give them."""
    rel = reader.base + "course_lib/" + module
    try:
        return reader.read(rel) if reader.exists(rel) else None
    except (SubmissionError, OSError):
        return None


def with_source_scans(reader: Reader, chapter: Chapter, rows: list[GradeRow]) -> list[GradeRow]:
    """``rows`` (one per case of ``chapter``, in order) with each ready-made case judged from the submitted files."""
    public = [row for g, row in zip(chapter.cases, rows) if not g.hidden and not g.case.reads_source]
    out = []
    for g, row in zip(chapter.cases, rows):
        if g.case.reads_source:
            sources = {module: submitted_source(reader, module) for module, _ in g.case.ready_made}
            res = judge_source(chapter.number, g.case, sources, public)
            row = GradeRow(chapter.number, "course_lib", g.label, res.earned, res.points, res.status, res.message,
                           "none")
        out.append(row)
    return out
