"""What a whole class got wrong, counted from the grade table: the numbers of `course report`.

Reads the table that `course grade --out DIR` wrote (DIR/gradebook.sqlite through gradebook.py's public
methods, or DIR/grades.csv where only that is there) and counts, per chapter, the distribution of scores,
the checks failed most, the known mistakes by how many learners made them, the hidden cases failed by
learners who passed every public case, and the learners who have not submitted. The command
(class_report.py) writes them out; the page (class_report_html.py) draws them; both import this module,
never each other's.

A chapter's score is the sum of its rows (course_lib cases and written answers, as in totals.csv); an
answer still waiting for grading by hand counts 0 until `course grade --manual` merges it. "Not
submitted" needs to know the class: the learners of --roster (one id a line, or a CSV with a
learner/id/username column) together with every learner the table holds.
"""
from __future__ import annotations

import csv
import re
import unicodedata
from dataclasses import asdict, dataclass, field
from pathlib import Path

from course_lib.provided import chapters as chapters_mod
from course_lib.provided.layout import SpecError, chapter_facts

from ..records.gradebook import FORMULA_START, MANUAL, Gradebook, GradebookError
from ..records.rows import GradeRow

HIDDEN_PREFIX = "hidden case "
FAILED = ("fail", "error", "missing")
BINS = 10
ROSTER_COLUMNS = ("learner", "id", "username", "student", "sis login id", "login", "email")

Table = list[tuple[str, GradeRow]]


class ReportError(Exception):
    """The report cannot be made; the message names the file and the fix."""


@dataclass
class Count:
    """One line of a ranking: what (a check, a known mistake), how many learners, and which."""

    name: str
    learners: list[str]
    detail: str = ""        # the mistake's text, or "hidden"/"public" and the points of a check

    @property
    def count(self) -> int:
        return len(self.learners)


@dataclass
class ChapterReport:
    number: str
    title: str
    max_points: float
    scores: dict[str, float]                    # learner -> points, for every learner with rows here
    bins: list[int]                             # learners per tenth of max_points (the last holds 100 %)
    failed_checks: list[Count]                  # course_lib cases and written answers, most failed first
    mistakes: list[Count]                       # known mistakes (the spec's MISTAKES), most made first
    public_passers: list[str]                   # learners who passed every public course_lib case
    hidden_failed: list[Count]                  # hidden cases failed by those learners
    not_submitted: list[str]
    awaiting_manual: int                        # written answers still to grade by hand
    mean: float = 0.0
    median: float = 0.0


@dataclass
class ClassReport:
    source: str
    learners: list[str]
    chapters: list[ChapterReport] = field(default_factory=list)
    leaderboard: list[dict] = field(default_factory=list)  # the capstone's trained models (leaderboard.py)

    def as_json(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------- reading
def _uncell(text: str) -> str:
    """grades.csv's cell back to its text: the ``'`` gradebook.csv_cell put before a formula goes."""
    return text[1:] if text.startswith("'") and text[1:].startswith(FORMULA_START) else text


def read_table(out: Path) -> Table:
    """(learner, row) of every row of the grade table in ``out``: gradebook.sqlite, else grades.csv."""
    db, grades = out / "gradebook.sqlite", out / "grades.csv"
    if db.is_file():
        try:
            book = Gradebook(db)
        except GradebookError as exc:
            raise ReportError(str(exc)) from None
        try:
            return book.table()
        finally:
            book.close()
    if grades.is_file():
        table: Table = []
        with open(grades, newline="", encoding="utf-8") as fh:
            for r in csv.DictReader(fh):
                try:
                    table.append((_uncell(r["learner"]), GradeRow(
                        _uncell(r["chapter"]), r["kind"], _uncell(r["component"]), float(r["points"]),
                        float(r["max_points"]), r["status"], _uncell(r["message"]), r["isolation"])))
                except (KeyError, ValueError) as exc:
                    raise ReportError(f"{grades} is not a grades.csv course grade wrote ({exc!r}); grade "
                                      f"again with `course grade SUBMISSIONS --out {out}`") from None
        return table
    raise ReportError(f"{out} holds no grade table (gradebook.sqlite or grades.csv): run `course grade "
                      f"SUBMISSIONS --out {out}` first, or pass the --out folder of that run")


def read_roster(path: Path) -> list[str]:
    """The class list: one learner id a line, or a CSV whose header names a learner/id/username column."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportError(f"--roster {path}: cannot read it ({exc}); give a UTF-8 text file with one "
                          "learner id a line") from None
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if lines and "," in lines[0]:
        rows = list(csv.reader(lines))
        header = [h.strip().lower() for h in rows[0]]
        column = next((header.index(c) for c in ROSTER_COLUMNS if c in header), None)
        if column is None:
            raise ReportError(f"--roster {path}: its header ({', '.join(rows[0])}) has no column named "
                              f"{' or '.join(ROSTER_COLUMNS[:3])}; name the learner id column 'learner'")
        ids = [r[column] for r in rows[1:] if len(r) > column]
    else:
        ids = lines
    return sorted({unicodedata.normalize("NFC", i.strip()) for i in ids if i.strip()})


# ---------------------------------------------------------------- counting
def _title(number: str) -> str:
    try:
        return chapter_facts(number).title
    except (SpecError, ValueError):
        return ""


def mistake_texts(number: str) -> dict[str, str]:
    """{key: text} of the chapter's known mistakes (its spec's MISTAKES); {} where it has none."""
    try:
        return dict(chapters_mod.load_spec(number).MISTAKES)
    except Exception:  # noqa: BLE001 - a chapter without a spec here names no mistakes, the rest stands
        return {}


def _natural(name: str) -> list[object]:
    """'hidden case 5' before 'hidden case 11'."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _ranked(found: dict[tuple[str, str], set[str]]) -> list[Count]:
    counts = [Count(name, sorted(who), detail) for (name, detail), who in found.items() if who]
    return sorted(counts, key=lambda c: (-c.count, _natural(c.name)))


def _median(values: list[float]) -> float:
    s = sorted(values)
    if not s:
        return 0.0
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def chapter_report(number: str, table: Table, everyone: list[str]) -> ChapterReport:
    """The numbers of one chapter, from the rows of the table of that chapter."""
    rows = [(who, r) for who, r in table if r.chapter == number and r.kind != "submission"]
    per: dict[str, list[GradeRow]] = {}
    for who, r in rows:
        per.setdefault(who, []).append(r)
    scores = {who: sum(r.points for r in rs) for who, rs in per.items()}
    max_points = max((sum(r.max_points for r in rs) for rs in per.values()), default=0.0)
    bins = [0] * BINS
    for points in scores.values():
        share = points / max_points if max_points else 0.0
        bins[min(BINS - 1, max(0, int(share * BINS)))] += 1
    failed: dict[tuple[str, str], set[str]] = {}
    for who, r in rows:
        if r.status in FAILED:
            where = "hidden" if r.component.startswith(HIDDEN_PREFIX) else (
                {"notebook": "written answer", "capstone": "trained model"}.get(r.kind, "public"))
            failed.setdefault((r.component, f"{where}, {r.max_points:g} pt"), set()).add(who)
    texts = mistake_texts(number)
    made = {(key, text): {who for who, r in rows if r.status == "fail" and text in r.message}
            for key, text in texts.items()}
    passers, hidden, said = [], {}, {}
    for who, rs in sorted(per.items()):
        public = [r for r in rs if r.kind == "course_lib" and not r.component.startswith(HIDDEN_PREFIX)]
        if public and all(r.status == "pass" for r in public):
            passers.append(who)
            for r in rs:
                if r.component.startswith(HIDDEN_PREFIX) and r.status in FAILED:
                    hidden.setdefault(r.component, set()).add(who)
                    said.setdefault(r.component, r.message)  # the first such learner's message, as an example
    return ChapterReport(
        number=number, title=_title(number), max_points=max_points, scores=dict(sorted(scores.items())),
        bins=bins, failed_checks=_ranked(failed), mistakes=_ranked(made), public_passers=passers,
        hidden_failed=_ranked({(name, said[name]): who for name, who in hidden.items()}),
        not_submitted=[who for who in everyone if who not in per],
        awaiting_manual=sum(r.status == MANUAL for _, r in rows),
        mean=sum(scores.values()) / len(scores) if scores else 0.0, median=_median(list(scores.values())))


def class_report(table: Table, roster: list[str] | None = None, numbers: list[str] | None = None,
                 source: str = "") -> ClassReport:
    """Every chapter asked for (default: every chapter the table holds), over the roster and the table's learners."""
    everyone = sorted(set(roster or []) | {who for who, _ in table})
    chosen = numbers or sorted({r.chapter for _, r in table if r.kind != "submission"})
    return ClassReport(source, everyone, [chapter_report(n, table, everyone) for n in chosen])
