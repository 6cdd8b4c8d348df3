"""`course report --out DIR [--roster FILE] [--chapters ch02 ...]`: what a whole class got wrong.

Reads the grade table that `course grade --out DIR` wrote (DIR/gradebook.sqlite through gradebook.py's
public methods, or DIR/grades.csv where only that is there) and writes, into DIR:

  report.html   the instructor's page: per chapter the distribution of scores (an SVG histogram), the
                checks failed most, the known mistakes by how many learners made them, the hidden cases
                failed by learners who passed every public case, and the learners who have not submitted
                and, with chapter 08, the capstone's leaderboard: each learner's trained model as the grader
                measured it, beside the baselines and the reference's recorded runs (leaderboard.py; learners
                under stable pseudonyms unless --names)
  report.json   the same numbers, for tools
  lms.csv, lms_canvas.csv   per-learner, per-chapter totals for an LMS gradebook (lms.py)

A chapter's score is the sum of its rows (course_lib cases and written answers, as in totals.csv); an
answer still waiting for grading by hand counts 0 until `course grade --manual` merges it. "Not
submitted" needs to know the class: the learners of --roster (one id a line, or a CSV with a
learner/id/username column) together with every learner the table holds.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from course_lib.provided import chapters as chapters_mod

from course_lib.provided.capstone import handin

from ..records.lms import write_lms
from .class_report_html import render
from .class_summary import ReportError, class_report, read_roster, read_table
from .leaderboard import leaderboard


# ---------------------------------------------------------------- the command
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="course report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path,
                        help="the --out folder of `course grade` (gradebook.sqlite or grades.csv); "
                             "the report goes there")
    parser.add_argument("--roster", type=Path, help="the class list, so that learners who submitted nothing are named")
    parser.add_argument("--chapters", nargs="+", help="chapters to report (default: every chapter graded)")
    parser.add_argument("--names", action="store_true",
                        help="the capstone leaderboard with learner ids (default: pseudonyms, stable per --out)")
    args = parser.parse_args(argv)
    try:
        args.numbers = [chapters_mod.normalise(c) for c in args.chapters] if args.chapters else None
    except ValueError as err:
        parser.error(str(err))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out: Path = args.out
    try:
        table = read_table(out)
        roster = read_roster(args.roster) if args.roster else None
    except ReportError as exc:
        print(f"course report: {exc}", file=sys.stderr)
        return 2
    report = class_report(table, roster, args.numbers, source=str(out))
    if any(c.number == handin.CHAPTER for c in report.chapters):
        report.leaderboard = leaderboard(table, out, names=args.names)
    (out / "report.html").write_text(render(report), encoding="utf-8")
    (out / "report.json").write_text(json.dumps(report.as_json(), indent=1, ensure_ascii=False) + "\n",
                                     encoding="utf-8")
    lms = write_lms(table, out, report.learners, [c.number for c in report.chapters])
    for c in report.chapters:
        worst = c.failed_checks[0] if c.failed_checks else None
        print(f"course report: ch{c.number}: {len(c.scores)} graded, median {c.median:g}/{c.max_points:g}, "
              f"{len(c.not_submitted)} not submitted"
              + (f"; failed most: {worst.name} ({worst.count})" if worst else ""))
    print(f"course report: wrote {out / 'report.html'}, {out / 'report.json'}, {', '.join(map(str, lms))}")
    return 0
