"""nbgrader settings for instructors: formgrader, autograde and feedback run from the repository root.

    solutions/source/chNN_<name>/   the nbgrader source notebooks (edit these)
    exercises/chNN_<name>/          the release learners get; generated and committed by `course release`
    submissions/                    collected submissions, submissions/<student>/chNN_<name>/ (git-ignored)
    grades/                         gradebook.db, autograded/ and feedback/ (git-ignored)

`course release` does not read this file: it runs nbgrader in a temporary course directory so that
exercises/ depends on solutions/ alone. Autograding needs the assignment in the gradebook: run
`nbgrader generate_assignment chNN_<name> --force` here once (it rewrites exercises/chNN_<name>/ with
the same bytes; `course release --check` confirms), then `nbgrader autograde chNN_<name>`.
"""
from pathlib import Path

c = get_config()  # noqa: F821 - defined by nbgrader when it reads this file

ROOT = Path(__file__).resolve().parent
(ROOT / "grades").mkdir(exist_ok=True)  # sqlite creates the database file, not its folder

c.CourseDirectory.root = str(ROOT)
c.CourseDirectory.source_directory = "solutions/source"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.submitted_directory = "submissions"
c.CourseDirectory.autograded_directory = "grades/autograded"
c.CourseDirectory.feedback_directory = "grades/feedback"
c.CourseDirectory.db_url = f"sqlite:///{ROOT / 'grades' / 'gradebook.db'}"
# The default 30 s per cell is tight on a loaded grading machine; the notebooks run in seconds.
c.ExecutePreprocessor.timeout = 120
