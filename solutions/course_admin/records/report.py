"""What a grading run hands out: grades.csv, totals.csv and one Markdown feedback file per learner,
all read back from the grade table. Feedback files are named by
``submissions.disk_name(learner)``: the id itself when plain, else an ASCII slug and a hash."""
from __future__ import annotations

from pathlib import Path

from course_lib.provided import chapters
from course_lib.provided.i18n import N_, _, check_name
from course_lib.provided.layout import SpecError, chapter_facts

from ..intake.submissions import disk_name
from .gradebook import MANUAL, Gradebook
from .lms import write_lms
from .rows import NAMES, GradeRow, total

SECTIONS = (("course_lib", N_("course_lib checks")), ("capstone", N_("Trained model")), ("notebook", N_("Notebook")),
            ("submission", N_("Submission")))


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _name(component: str) -> str:
    """A row's name as the learner reads it (the grade table keeps the English): i18n.check_name."""
    return _md(check_name(component, NAMES))


def _title(number: str) -> str:
    try:
        return " — " + _(chapter_facts(number).title)
    except (SpecError, ValueError):
        return ""


def waiting(rows: list[GradeRow]) -> str:
    """``, of which N points wait for hand grading`` when written answers wait for the instructor, else ``""``."""
    pending = sum(r.max_points for r in rows if r.status == MANUAL)
    if not pending:
        return ""
    return (_(", of which {points} point waits for hand grading") if pending == 1 else
            _(", of which {points} points wait for hand grading")).format(points=f"{pending:g}")


def _section(heading: str, rows: list[GradeRow]) -> list[str]:
    """A part's table, then what to fix: the failed rows grouped by message (answers waiting for the
    instructor are not failures: the learner has nothing to fix there)."""
    got, possible = total(rows)
    lines = [_("### {heading}: {got} / {possible}{waiting}").format(heading=_(heading), got=f"{got:g}",
                                                                   possible=f"{possible:g}", waiting=waiting(rows)), "",
             f"| {_('check')} | {_('points')} | {_('status')} |", "|---|---|---|"]
    lines += [f"| {_name(r.component)} | {r.points:g} / {r.max_points:g} | {_(r.status)} |" for r in rows]
    lines.append("")
    measured = [r.message for r in rows if r.status == "pass" and r.kind == "capstone" and r.message]
    if measured:  # a trained model's accuracy is worth reading when it passes too
        lines += [_("Measured:"), ""] + [f"- {_md(m)}" for m in measured] + [""]
    groups: dict[str, list[str]] = {}
    for r in rows:
        if r.status not in ("pass", MANUAL) and r.message:
            groups.setdefault(r.message, []).append(r.component)
    if groups:
        lines += [_("What to fix:"), ""]
        for message, components in groups.items():
            checks = "; ".join(f"*{_name(c)}*" for c in components)
            lines.append(f"- {_md(message)}  \n  " + _("({count} check(s): {checks})").format(
                count=len(components), checks=checks))
        lines.append("")
    return lines


def feedback_markdown(learner: str, rows: list[GradeRow], mistake_texts: dict[str, dict[str, str]]) -> str:
    """One learner's feedback: per chapter, the points of each part and what to fix, grouped by message."""
    lines = [_("# Feedback for {learner}").format(learner=learner), ""]
    by_chapter: dict[str, list[GradeRow]] = {}
    for r in rows:
        by_chapter.setdefault(r.chapter, []).append(r)
    for number, rs in sorted(by_chapter.items()):
        got, possible = total(rs)
        lines += [_("## Chapter {number}{title}: {got} / {possible} points{waiting}").format(
            number=number, title=_title(number), got=f"{got:g}", possible=f"{possible:g}", waiting=waiting(rs)), ""]
        for kind, heading in SECTIONS:
            of_kind = [r for r in rs if r.kind == kind]
            if of_kind:
                lines += _section(heading, of_kind)
        # the known mistakes as the rows say them, in the learner's language: a caller may give them in English
        # (class_summary.mistake_texts), and _() of a text already translated is that text
        texts = {_(text) for text in mistake_texts.get(number, {}).values()}
        named = sorted({text for r in rs for text in texts if r.status == "fail" and text in r.message})
        if named:
            lines += [_("### Known mistakes recognised"), ""] + [f"- {_md(t)}" for t in named] + [""]
    return "\n".join(lines).rstrip() + "\n"


def _mistake_texts() -> dict[str, dict[str, str]]:
    texts = {}
    for n in chapters.available():
        try:
            texts[n] = {k: _(v) for k, v in chapters.load_spec(n).MISTAKES.items()}  # as the rows say them
        except Exception:  # noqa: BLE001 - a broken spec costs its names, never the export
            texts[n] = {}
    return texts


def export(book: Gradebook, out: Path) -> None:
    """Write grades.csv, totals.csv, lms.csv, lms_canvas.csv and feedback/<learner>.md from the grade table."""
    book.export_csv(out / "grades.csv")
    book.export_totals(out / "totals.csv")
    write_lms(book.table(), out)  # lms.csv, lms_canvas.csv: one column per chapter, for an LMS gradebook
    folder = out / "feedback"
    folder.mkdir(exist_ok=True)
    texts = _mistake_texts()
    for learner in book.learners():  # file names: disk_name(learner), safe and distinct per learner id
        text = feedback_markdown(learner, book.rows(learner), texts)
        (folder / f"{disk_name(learner)}.md").write_text(text, encoding="utf-8")
