"""The `course` command: ``course -h`` prints USAGE, in the learner's language (i18n.py)."""
from __future__ import annotations

import importlib
import sys

from .i18n import N_, _
from .layout import LAYOUT

USAGE = N_("""The `course` command.

Learners:    course check ch02 [--json]     run the public checks on your course_lib
             course submit ch02             pack your notebook and course_lib for the instructor
             course capstone finetune --quick   train the capstone's classifier (see course capstone -h)
Instructors: course release | refs | grade  (tools in solutions/course_admin, not shipped to learners)
             course report --out grades/   what the class got wrong (report.html) and LMS totals
             course verify SUBS --out grades/   re-run each capstone hand-in's recipe (the reference's code)
             course gradescope ch02         the chapter's Gradescope autograder zip
             course feedback ch02           course_lib feedback into nbgrader's, before release_feedback""")

LEARNER = {"check": "course_lib.provided.check", "submit": "course_lib.provided.submit",
           "capstone": "course_lib.provided.capstone.run"}
INSTRUCTOR = {"release": "course_admin.release.release", "refs": "course_admin.release.refs",
              "grade": "course_admin.grading.grade", "verify": "course_admin.grading.verify", "report": "course_admin.exports.class_report",
              "gradescope": "course_admin.exports.gradescope", "feedback": "course_admin.exports.hub_feedback"}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {**LEARNER, **INSTRUCTOR}
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in commands:
        print(_(USAGE))
        if argv and argv[0] not in ("-h", "--help"):
            print("\n" + _("course: unknown command {command}; choose one of: {commands}").format(
                command=repr(argv[0]), commands=", ".join(commands)), file=sys.stderr)
            return 2
        return 0
    name, rest = argv[0], argv[1:]
    if name in INSTRUCTOR and not (LAYOUT.solutions / "course_admin").is_dir():
        print(_("course {command}: this is an instructor's command; its tools ({folder}) ship only with the "
                "instructor's repository.").format(command=name, folder=f"{LAYOUT.rel(LAYOUT.solutions)}/course_admin"),
              file=sys.stderr)
        return 2
    module = importlib.import_module(commands[name])
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
