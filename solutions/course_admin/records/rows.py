"""The records of a grading run: the options it runs with, and one typed row per graded component.

Data flows one way: submission -> snapshot -> sandbox -> outputs -> trusted comparison -> GradeRow ->
grade table (gradebook.py) -> CSV and feedback (report.py).

A row's message is text for people, in the language graded in, and may quote what a learner wrote: nothing
reads a number back out of it. What a tool needs (the capstone's leaderboard) the grader writes as typed
fields beside the row (``Measurement``), stored in the grade table's own columns.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Literal

from course_lib.provided.i18n import N_

Kind = Literal["course_lib", "capstone", "notebook", "submission"]
Isolation = Literal["bwrap", "rlimits", "none"]
PREREQ_POLICIES = ("learner", "reference")
# a row name made from a template (grading/trained.py): English in the grade table, i18n.check_name shows it
TRAINED_BAR = N_("trained model: test accuracy of at least {bar}")
NAMES = (TRAINED_BAR,)  # with i18n.HIDDEN_CASE, the templates check_name reads a row's name from


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
class Measurement:
    """What the grader measured of a trained model (grading/trained.py), as typed values, never parsed from a
    message: the leaderboard and Gradescope's read these. The last three are what the run's summary claims
    (not checked), bounded when the grader read them."""

    accuracy: float        # on the test split, computed by the grader with the reference classifier
    se: float              # one standard error of it
    parameters: int        # counted in the model the weights were loaded into
    weights: str           # handin.digest of the weights: what a verify verdict names
    passed: bool           # reached the bar
    overclaimed: bool      # run.json claims more than was measured, by more than noise
    minutes: float | None  # claimed minutes of training (None: not said, or not a number)
    device: str            # claimed device's name, bounded and escaped (trained.shown)
    pretrained: bool       # claimed pretrained start


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
    measured: Measurement | None = field(default=None, kw_only=True)  # the capstone's measured model (its main row)

    def with_message(self, message: str) -> GradeRow:
        return replace(self, message=message)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def total(rows: list[GradeRow]) -> tuple[float, float]:
    return sum(r.points for r in rows), sum(r.max_points for r in rows)
