"""The exercise notebooks released with nbgrader: `nbgrader generate_assignment` on source folders, in a temporary
course directory with no Jupyter configuration, its release copied out (release.py decides what and where).

nbgrader's start-up, not its work, is most of what a run costs: a process of its own for each of a release's 16
notebooks (8 chapters, English and Chinese) took 90 s of the 2-core machine's time where one process a language
takes 6 s. So one process releases every folder of a batch (their names unique within it: a language), the
batches run side by side, and the gradebook is not written (``--no-db``): the course directory is thrown away,
and what nbgrader writes in a released notebook is the same, byte for byte, with it or without it.
"""
from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from course_lib.provided.preflight import ANSWER_PLACEHOLDER

from .stubs import ReleaseError

# nbgrader's default CourseDirectory.ignore, which the repository's nbgrader_config.py keeps: collect then
# brings back every file a learner submits (their course_lib snapshot in course_submission/ included).
NBGRADER_IGNORE = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback"]
# Files never copied to or compared in exercises/ (nbgrader's ignore list, plus editor junk).
IGNORE = [*NBGRADER_IGNORE, ".DS_Store", "*~"]


def _ignored(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in IGNORE)


def files_under(folder: Path) -> dict[str, Path]:
    """Relative posix path -> file, for every file under ``folder`` not ignored."""
    found = {}
    if folder.is_dir():
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = sorted(d for d in dirnames if not _ignored(d))
            for name in sorted(filenames):
                if not _ignored(name):
                    path = Path(dirpath) / name
                    found[path.relative_to(folder).as_posix()] = path
    return found


def generate_exercise(source: Path, dest: Path) -> None:
    """Run nbgrader generate_assignment on one source folder and put the release in ``dest``."""
    generate_exercises([{source: dest}])


def generate_exercises(batches: list[dict[Path, Path]], placeholders: list[str] | None = None) -> None:
    """nbgrader generate_assignment on every source folder of every batch ({source folder: release folder}): one
    nbgrader process a batch, over all its folders, the batches at the same time; ``placeholders[i]`` is what
    batch i's written answers hold (nbgrader's ClearSolutions.text_stub: each edition's, preflight.ANSWER_PLACEHOLDER;
    nbgrader's own by default). Raises ReleaseError naming the folders of a batch that failed, with what nbgrader
    said."""
    with tempfile.TemporaryDirectory(prefix="course-release-nbgrader-") as tmp, \
            tempfile.TemporaryDirectory(prefix="course-release-tmpdir-") as its_tmp:
        # nbgrader calls the `alembic` script by name: put this environment's scripts first on PATH.
        # JUPYTER_NO_CONFIG makes jupyter_core create an empty config folder (jupyter-clean-cfg-*) with
        # mkdtemp and never removes it: TMPDIR puts it in a temporary folder of ours, removed below.
        scripts = str(Path(sys.executable).parent)
        env = {**os.environ, "JUPYTER_NO_CONFIG": "1", "PYTHONHASHSEED": "0", "TMPDIR": its_tmp,
               "PATH": os.pathsep.join([scripts, os.environ.get("PATH", "")])}
        running = []
        stubs = placeholders or [ANSWER_PLACEHOLDER["en"]] * len(batches)
        for number, (batch, stub) in enumerate((b, stub) for b, stub in zip(batches, stubs) if b):
            course = Path(tmp) / str(number)
            for source in batch:
                shutil.copytree(source, course / "source" / source.name, ignore=shutil.ignore_patterns(*IGNORE))
            assignment = next(iter(batch)).name if len(batch) == 1 else "*"
            command = [sys.executable, "-m", "nbgrader", "generate_assignment", assignment, "--force", "--no-db",
                       "--log-level=ERROR", f"--CourseDirectory.root={course}", f"--ClearSolutions.text_stub={stub}"]
            running.append((batch, course, subprocess.Popen(command, cwd=course, env=env, stdout=subprocess.PIPE,
                                                            stderr=subprocess.STDOUT, text=True)))
        failed = []
        for batch, course, proc in running:
            output = proc.communicate()[0]
            missing = [s.name for s in batch if not (course / "release" / s.name).is_dir()]
            if proc.returncode != 0 or missing:
                failed.append(f"nbgrader generate_assignment {', '.join(missing or [s.name for s in batch])} failed "
                              f"(exit {proc.returncode}):\n{output}".rstrip())
                continue
            for source, dest in batch.items():
                for rel, path in files_under(course / "release" / source.name).items():
                    target = dest / rel
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(path, target)
        if failed:
            raise ReleaseError("\n".join(failed))
