"""The learner tree's tests share one folder and one virtual environment, in both languages.

`make install` in a fresh learner tree builds a .venv with PyTorch and Jupyter (one to two minutes); the English
tests (test_learner_tree.py) and the Chinese one (test_learner_tree_zh.py) each need an installed tree. So a
session has one folder: each module asks for its language's release, which replaces every file of the folder but
the .venv (released into an empty folder first, as `course release --learner-tree` requires, then moved in). The
first module to install pays for a fresh .venv and asserts on that; the other's `make install` runs again on the
newer pyproject.toml and the same .venv, as a learner's does after an update. Both modules run on one worker
(the xdist group below), so the .venv is built once a run.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from course_admin.release.release import main as release

GROUP = pytest.mark.xdist_group("learner_tree")  # both modules' pytestmark: one worker, one .venv


class SharedTree:
    """One learner-tree folder, released in the language a module asks for; the .venv stays."""

    def __init__(self, base: Path) -> None:
        self.base, self.path, self.lang = base, base / "tree", ""

    def released(self, lang: str) -> Path:
        if lang != self.lang:
            fresh = self.base / f"release-{lang}"
            argv = ["--learner-tree", str(fresh)] + (["--lang", lang] if lang != "en" else [])
            assert release(argv) == 0, f"course release --learner-tree --lang {lang}"
            venv = self.path / ".venv"
            if venv.is_dir():
                venv.rename(fresh / ".venv")
            shutil.rmtree(self.path, ignore_errors=True)
            fresh.rename(self.path)
            self.lang = lang
        return self.path


@pytest.fixture(scope="session")
def shared_tree(tmp_path_factory: pytest.TempPathFactory) -> SharedTree:
    return SharedTree(tmp_path_factory.mktemp("learner"))
