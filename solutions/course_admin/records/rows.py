"""The records of a grading run: the options it runs with, and one typed row per graded component.

Data flows one way: submission -> snapshot -> sandbox -> outputs -> trusted comparison -> GradeRow ->
grade table (gradebook.py) -> CSV and feedback (report.py).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Literal

Kind = Literal["course_lib", "capstone", "notebook", "submission"]
Isolation = Literal["bwrap", "rlimits", "none"]
PREREQ_POLICIES = ("learner", "reference")


@dataclass(frozen=True)
class Options:
    """How `course grade` runs learner code (from its command line)."""

    isolation: str = "bwrap"            # "bwrap" or "rlimits", decided once per run (cold.detect)
    timeout_s: float = 60.0             # course_lib: per learner and chapter
    memory_mb: int = 2048               # course_lib: the child's address space
    notebooks: bool = True              # read the written answers of the chapter's notebook too
    prereqs: str = "learner"            # whose modules of earlier chapters run: "learner" or "reference"
    store: str | None = None            # folder of the prepared chapters (plan.use_store), under --out


@dataclass(frozen=True)
class GradeRow:
    """One line of the grade table: a course_lib case, the capstone's trained model, a notebook's written answer,
    or a note on the submission."""

    chapter: str
    kind: str            # Kind
    component: str       # the case name ("values, no mask", "hidden case 3") or the cell's grade_id
    points: float
    max_points: float
    status: str          # pass | fail | missing | error | warning | needs manual grading
    message: str
    isolation: str       # what the learner's code ran under: bwrap | rlimits | none (nothing ran)

    def with_message(self, message: str) -> GradeRow:
        return replace(self, message=message)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def total(rows: list[GradeRow]) -> tuple[float, float]:
    return sum(r.points for r in rows), sum(r.max_points for r in rows)
