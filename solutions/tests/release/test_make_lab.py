"""`make lab` starts as root (containers, Colab, many cloud machines), saying what it allowed.

Jupyter refuses to start as root ("Running as root is not recommended") unless given --allow-root. Both
Makefiles (the instructor's and the learner's, solutions/learner/Makefile) give it exactly when the user
is root. The recipe runs for real, with a stand-in `jupyter` that prints its arguments (BIN on the
command line), so nothing starts a server.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from course_lib.provided.layout import REPO_ROOT

MAKEFILES = [REPO_ROOT / "Makefile", REPO_ROOT / "solutions" / "learner" / "Makefile"]
SAYS = "starting JupyterLab with --allow-root"


@pytest.fixture(scope="module")
def fake_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A BIN with an up-to-date `course` (so `install` does nothing) and a `jupyter` that echoes."""
    folder = tmp_path_factory.mktemp("bin")
    (folder / "jupyter").write_text('#!/bin/sh\necho "jupyter called with: $*"\n', encoding="utf-8")
    (folder / "jupyter").chmod(0o755)
    (folder / "course").touch()
    return folder


def make_lab(makefile: Path, fake_bin: Path, *extra: str) -> str:
    done = subprocess.run(["make", "--no-print-directory", "-f", str(makefile), "lab", f"BIN={fake_bin}", *extra],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("makefile", MAKEFILES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_make_lab_allows_root_only_for_root_and_says_so(makefile: Path, fake_bin: Path) -> None:
    as_root = make_lab(makefile, fake_bin, "LAB_UID=0")
    assert "jupyter called with: lab --allow-root exercises/" in as_root
    assert SAYS in as_root and "root" in as_root.split(SAYS)[0]

    as_user = make_lab(makefile, fake_bin, "LAB_UID=1000")
    assert "jupyter called with: lab exercises/" in as_user
    assert "--allow-root" not in as_user and SAYS not in as_user

    by_default = make_lab(makefile, fake_bin)  # LAB_UID comes from `id -u`
    assert ("--allow-root" in by_default) == (os.geteuid() == 0)


@pytest.mark.slow  # starts jupyter
def test_this_jupyter_knows_allow_root() -> None:
    jupyter = REPO_ROOT / ".venv" / "bin" / "jupyter"
    if not jupyter.is_file():
        pytest.skip("no .venv/bin/jupyter here")
    done = subprocess.run([str(jupyter), "lab", "--help-all"], capture_output=True, text=True, timeout=120)
    assert "--allow-root" in done.stdout
