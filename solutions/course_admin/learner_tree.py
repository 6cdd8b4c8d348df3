"""`course release --learner-tree DIR`: copy what learners receive into a new folder."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from .stubs import ReleaseError

# What learners never receive: the instructor's material, the project's own CI, and the book's sources
# (the book executes the reference implementation; learners read the published book instead).
INSTRUCTOR_ONLY = ("solutions/", ".ci/", "nbgrader_config.py", "book/", "_config.yml", "_toc.yml")


def learner_files(root: Path) -> list[str]:
    """Paths (relative, sorted) that learners receive: git's files outside INSTRUCTOR_ONLY."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                cwd=root, capture_output=True, check=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError) as err:
        raise ReleaseError(f"--learner-tree needs a git checkout at {root} ({err})") from err
    return sorted(p for p in listed if p and not p.startswith(INSTRUCTOR_ONLY) and (root / p).is_file())


def export_learner_tree(root: Path, dest: Path) -> list[str]:
    """Copy the learner's files of ``root`` into the new folder ``dest``."""
    if dest.exists() and any(dest.iterdir()):
        raise ReleaseError(f"--learner-tree: {dest} exists and is not empty; give a new folder")
    files = learner_files(root)
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, target)
    return files
