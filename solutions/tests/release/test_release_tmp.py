"""`course release` leaves nothing in the temporary folder: nbgrader's empty config folders included.

With ``JUPYTER_NO_CONFIG`` set, jupyter_core makes a ``jupyter-clean-cfg-*`` folder with mkdtemp in every
nbgrader process and never removes it (8 a release; 164 had piled up on one machine).
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from course_lib.provided.layout import REPO_ROOT

from course_admin.release.exercises import generate_exercise


@pytest.mark.slow  # an nbgrader process
def test_generating_an_exercise_leaves_no_jupyter_clean_cfg_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))        # what nbgrader's process inherits
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # and this process's own temporary folders
    source = sorted((REPO_ROOT / "solutions" / "source").glob("ch01_*"))[0]
    generate_exercise(source, tmp_path / "out")
    assert any((tmp_path / "out").rglob("*.ipynb")), "nbgrader released nothing"
    assert sorted(p.name for p in scratch.iterdir()) == [], "left behind in the temporary folder"
