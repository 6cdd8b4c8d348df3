"""nbgrader settings for instructors: formgrader and autograde run from the repository root.

    solutions/source/chNN_<name>/   the nbgrader source notebooks (edit these)
    exercises/chNN_<name>/          the release learners get; generated and committed by `course release`
    submissions/                    collected submissions, submissions/<student>/chNN_<name>/ (git-ignored)
    grades/                         gradebook.db, autograded/ and feedback/ (git-ignored)

Nothing of a learner's runs on the instructor's machine. Code points come from `course grade` (the
learner's course_lib in a sandbox, judged outside it); a notebook's only graded cells are written
answers, graded by hand in formgrader. So `nbgrader autograde chNN_<name>` here neither executes the
notebooks nor clears their outputs: it loads each learner's notebook, as they saved it (their figures
included), into the gradebook for formgrader. `course release` refuses a source notebook with an
automatically graded code cell, which could only be scored by running it.

`course release` does not read this file: it runs nbgrader in a temporary course directory so that
exercises/ depends on solutions/ alone. Formgrader needs the assignment in the gradebook: run
`nbgrader generate_assignment chNN_<name> --force` here once (it rewrites exercises/chNN_<name>/ with
the same bytes; `course release --check` confirms), then `nbgrader autograde chNN_<name>`.

A class that reads Chinese: `COURSE_LANG=zh_CN nbgrader ...` (for every nbgrader command of that class, with
its own gradebook) takes the Chinese edition's folders instead, solutions/source_zh_CN/ and exercises_zh_CN/,
which `course release` writes from solutions/locale/zh_CN/: the same cells, grade ids and points, the prose in
Chinese. submissions/ and grades/ stay where they are.

The ignore list is nbgrader's default, and nbgrader applies it when it copies a folder: generate_assignment,
fetch, submit and collect alike. So `nbgrader collect chNN_<name>` needs no option: it brings back each
learner's notebook and course_submission/ (the course_lib snapshot `course submit --into-assignment` wrote).
A source folder holds its notebook only (`course release` refuses anything else, naming the file), so no
source file is released beside it, nor copied by autograde over a file the learner submitted.
"""
import os
from pathlib import Path

from course_lib.provided.i18n import normalise
from course_lib.provided.preflight import ANSWER_PLACEHOLDER
from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, DeduplicateIds, LimitOutput,
                                    OverwriteCells, OverwriteKernelspec, SaveAutoGrades)

c = get_config()  # noqa: F821 - defined by nbgrader when it reads this file

ROOT = Path(__file__).resolve().parent
(ROOT / "grades").mkdir(exist_ok=True)  # sqlite creates the database file, not its folder

# COURSE_LANG as course_lib reads it: zh, zh_CN and zh-Hans all mean the Chinese edition.
try:
    LANG = normalise(os.environ.get("COURSE_LANG", "en"))
except ValueError as err:
    raise SystemExit(f"nbgrader_config.py: COURSE_LANG: {err}") from None
EDITIONS = {"en": ("solutions/source", "exercises"),
            "zh_CN": ("solutions/source_zh_CN", "exercises_zh_CN")}

c.CourseDirectory.root = str(ROOT)
# a written answer's placeholder in this edition (在此作答 in Chinese), as `course release` writes it: the same bytes
c.ClearSolutions.text_stub = ANSWER_PLACEHOLDER[LANG]
c.CourseDirectory.source_directory, c.CourseDirectory.release_directory = EDITIONS[LANG]
c.CourseDirectory.submitted_directory = "submissions"
c.CourseDirectory.autograded_directory = "grades/autograded"
c.CourseDirectory.feedback_directory = "grades/feedback"
c.CourseDirectory.db_url = f"sqlite:///{ROOT / 'grades' / 'gradebook.db'}"
# nbgrader's default ignore list, which nbgrader applies to collect too: a plain `nbgrader collect` brings
# back the learner's course_submission/ (course_lib snapshot included). No source file can overwrite a
# learner's: `course release` refuses a source folder that holds anything but its notebook.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback"]

# nbgrader's defaults less ClearOutput (keep the learner's saved figures for formgrader) and less
# Execute (never run a learner's notebook here).
c.Autograde.sanitize_preprocessors = [DeduplicateIds, OverwriteKernelspec, OverwriteCells, CheckCellMetadata]
c.Autograde.autograde_preprocessors = [ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades,
                                       AssignLatePenalties, CheckCellMetadata]
