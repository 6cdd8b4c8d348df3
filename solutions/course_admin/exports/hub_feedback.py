"""`course feedback ch02 [--out grades/] [--nbgrader-feedback DIR]`: the course_lib feedback into
nbgrader's, so that `nbgrader release_feedback` carries it to each learner on a hub.

nbgrader's exchange returns one HTML file per notebook (`nbgrader generate_feedback` writes them into
``<feedback_directory>/<student>/<assignment>/``); it knows the written answers only. This command puts,
at the top of each of those files, the learner's feedback from `course grade`'s table for that chapter
(the points of every check, what to fix, the known mistakes recognised: report.feedback_markdown), as
HTML with every character of the table's text escaped. Run it after `nbgrader generate_feedback` and
before `nbgrader release_feedback`; running it again replaces the block it wrote, never adds a second.
The nbgrader student id is the learner id `course grade` used (it grades nbgrader's
``submitted/<student>/<assignment>/`` under the student folder's name).
"""
from __future__ import annotations

import argparse
import sys
import unicodedata
from pathlib import Path

from course_lib.provided import chapters as chapters_mod
from course_lib.provided.i18n import _
from course_lib.provided.layout import LAYOUT

from ..records.gradebook import Gradebook, GradebookError
from ..records.report import feedback_markdown
from ..records.rows import GradeRow
from .class_summary import mistake_texts

BEGIN, END = "<!-- course grade: begin -->", "<!-- course grade: end -->"


def feedback_html(learner: str, rows: list[GradeRow], number: str) -> str:
    """The learner's course_lib feedback for one chapter, as an HTML block (raw HTML in the text is escaped)."""
    from markdown_it import MarkdownIt

    texts = {key: _(text) for key, text in mistake_texts(number).items()}  # in the learner's language, as the rows
    text = feedback_markdown(learner, rows, {number: texts})
    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(text)
    return (f'{BEGIN}<div class="course-grade" style="border:2px solid #4a7ab5;padding:0 1em;margin:1em 0">'
            f"{body}</div>{END}")


def inject(html: str, block: str) -> str:
    """``html`` with ``block`` at the start of its body, in place of a block an earlier run put there."""
    if BEGIN in html and END in html:
        start, stop = html.index(BEGIN), html.index(END) + len(END)
        return html[:start] + block + html[stop:]
    at = html.find("<body")
    at = html.find(">", at) + 1 if at >= 0 else 0
    return html[:at] + block + html[at:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="course feedback", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("chapter", help="the chapter of the nbgrader assignment, e.g. ch02")
    parser.add_argument("--out", type=Path, default=Path("grades"), help="the --out folder of `course grade`")
    parser.add_argument("--nbgrader-feedback", type=Path,
                        help="nbgrader's feedback_directory (default: OUT/feedback, as nbgrader_config.py sets it)")
    args = parser.parse_args(argv)
    try:
        number = chapters_mod.normalise(args.chapter)
    except ValueError as err:
        parser.error(str(err))
    assignment = LAYOUT.exercise_name(number)
    folder = args.nbgrader_feedback or args.out / "feedback"
    db = args.out / "gradebook.sqlite"
    if not db.is_file():
        print(f"course feedback: {db} is missing: run `course grade SUBMISSIONS --out {args.out}` first", file=sys.stderr)
        return 2
    pages = sorted(folder.glob(f"*/{assignment}/*.html"))
    if not pages:
        print(f"course feedback: no nbgrader feedback in {folder}/<student>/{assignment}/: run `nbgrader "
              f"generate_feedback {assignment}` first (or pass --nbgrader-feedback)", file=sys.stderr)
        return 2
    try:
        book = Gradebook(db)
    except GradebookError as exc:
        print(f"course feedback: {exc}", file=sys.stderr)
        return 2
    missing = []
    try:
        for page in pages:
            learner = unicodedata.normalize("NFC", page.parent.parent.name)
            rows = [r for r in book.rows(learner) if r.chapter == number]
            if not rows:
                missing.append(learner)
                continue
            page.write_text(inject(page.read_text(encoding="utf-8"), feedback_html(learner, rows, number)),
                            encoding="utf-8")
    finally:
        book.close()
    print(f"course feedback: course_lib feedback added to {len(pages) - len(missing)} feedback file(s) of {assignment}")
    if missing:
        print(f"course feedback: no grades of chapter {number} for {', '.join(missing)} in {db}: grade them with "
              "`course grade`, then run this again", file=sys.stderr)
        return 1
    return 0
