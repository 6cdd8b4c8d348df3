"""The `course` command: ``course -h`` prints USAGE, in the learner's language (i18n.py).

Every target of the learner's Makefile (solutions/learner/Makefile) has a `course` command that does the same,
so that a learner without `make` (Windows) follows the same loop: `make check CH=01` is `course check ch01`,
`make test` is `course test`, `make lab` is `course lab`, `make submit CH=01` is `course submit ch01`
(`make install` is the README's two lines: `course` exists once it ran). Nothing here needs a shell, `make`
or `fork`: `course test` and `course lab` start Python itself (``sys.executable -m ...``), which works the same
on Windows, macOS and Linux.
"""
from __future__ import annotations

import importlib
import os
import subprocess
import sys

from .i18n import N_, _
from .layout import LAYOUT

USAGE = N_("""The `course` command.

Learners:    course check ch02 [--json]     run the public checks on your course_lib
             course test                    every public check of every chapter (as `make test`)
             course lab                     JupyterLab on the exercise notebooks (as `make lab`)
             course submit ch02             pack your notebook and course_lib for the instructor
             course capstone finetune --quick   train the capstone's classifier (see course capstone -h)
Instructors: course release | refs | grade  (tools in solutions/course_admin, not shipped to learners)
             course report --out grades/   what the class got wrong (report.html) and LMS totals
             course verify SUBS --out grades/   re-run each capstone hand-in's recipe (the reference's code)
             course gradescope ch02         the chapter's Gradescope autograder zip
             course feedback ch02           course_lib feedback into nbgrader's, before release_feedback""")

# a command: "module" (its main(argv)) or "module:function" (that function(argv))
LEARNER = {"check": "course_lib.provided.check", "submit": "course_lib.provided.submit",
           "capstone": "course_lib.provided.capstone.run", "test": "course_lib.provided.cli:run_tests",
           "lab": "course_lib.provided.cli:lab"}
INSTRUCTOR = {"release": "course_admin.release.release", "refs": "course_admin.release.refs",
              "grade": "course_admin.grading.grade", "verify": "course_admin.grading.verify", "report": "course_admin.exports.class_report",
              "gradescope": "course_admin.exports.gradescope", "feedback": "course_admin.exports.hub_feedback"}
ROOT_NOTICE = N_("course lab: you are root (uid 0), as in containers, Colab and many cloud machines: starting "
                 "JupyterLab with --allow-root, which lets it run as root instead of refusing; notebooks and "
                 "terminals run as root too.")


def _wait(command: list[str]) -> int:
    """Run ``command`` in the course folder and return its exit status; a Ctrl-C reaches it too (it decides:
    JupyterLab asks to confirm, pytest stops and reports), so this process waits for it rather than leaving it."""
    process = subprocess.Popen(command, cwd=LAYOUT.root)
    while True:
        try:
            return process.wait()
        except KeyboardInterrupt:
            continue


def pytest_command(argv: list[str]) -> list[str]:
    """What `course test` runs: `make test`'s ``python -m pytest`` with this interpreter, on the public tests
    (``tests/``, also in the instructor's repository, whose own testpaths hold its whole suite); ``argv`` is
    passed on (``-k ch02``, ``--tb=long``, a test file)."""
    return [sys.executable, "-m", "pytest", "-o", "testpaths=tests", *argv]


def run_tests(argv: list[str]) -> int:
    """`course test [PYTEST OPTIONS]`: every public check of every chapter, one line per failure."""
    return _wait(pytest_command(argv))


def is_root() -> bool:
    """Whether this process runs as root (uid 0); never on Windows, which has no uids (no ``os.geteuid``)."""
    geteuid = getattr(os, "geteuid", None)
    return geteuid is not None and geteuid() == 0


def lab_command(argv: list[str], root: bool) -> list[str]:
    """What `course lab` runs: `make lab`'s ``jupyter lab [--allow-root] exercises/``, as ``python -m jupyterlab``
    (the module behind `jupyter lab`, found without a PATH or a script); ``argv`` goes to JupyterLab."""
    return [sys.executable, "-m", "jupyterlab", *(["--allow-root"] if root else []), *argv, "exercises"]


def lab(argv: list[str]) -> int:
    """`course lab [JUPYTERLAB OPTIONS]`: JupyterLab on the exercise notebooks; as root, with --allow-root, said."""
    root = is_root()
    if root:
        print(_(ROOT_NOTICE), flush=True)
    return _wait(lab_command(argv, root))


def _target(spec: str):  # noqa: ANN202 - a command's function: argv -> exit status
    module, _sep, function = spec.partition(":")
    return getattr(importlib.import_module(module), function or "main")


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
    return int(_target(commands[name])(rest) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
