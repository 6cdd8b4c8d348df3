"""A source folder holds its notebook only: `course release` refuses any other file, naming it and the fix.

nbgrader copies every file of a source folder into the release and, in autograde, over the learner's
submitted file of the same name. The repository's nbgrader_config.py keeps nbgrader's default ignore list
(so that collect brings back the learner's course_lib snapshot), so this refusal is what keeps a source
file from ever overwriting a learner's.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from nbgrader.coursedir import CourseDirectory
from traitlets.config.loader import PyFileConfigLoader

from course_lib.provided.layout import REPO_ROOT, Layout

from course_admin.release.release import NBGRADER_IGNORE, main, refuse_extra_files
from course_admin.release.stubs import ReleaseError

SOURCES = REPO_ROOT / "solutions" / "source"


def source_copy(root: Path, name: str = "ch02_attention") -> Path:
    """A copy of one real source folder under ``root``/solutions/source."""
    folder = root / "solutions" / "source" / name
    shutil.copytree(SOURCES / name, folder, ignore=shutil.ignore_patterns(*NBGRADER_IGNORE))
    return folder


def test_the_real_source_folders_pass() -> None:
    layout = Layout(REPO_ROOT)
    assert layout.exercise_sources(), "no source folder found"
    for source in layout.exercise_sources():
        refuse_extra_files(layout, source)


@pytest.mark.parametrize("planted", ["helper.py", "course_lib", "data.csv", "notes.ipynb"])
def test_an_extra_file_is_refused_with_its_name_and_the_fix(tmp_path: Path, planted: str) -> None:
    folder = source_copy(tmp_path)
    if planted == "course_lib":
        (folder / planted).mkdir()
        (folder / planted / "attention.py").write_text("def f():\n    return 1\n", encoding="utf-8")
    else:
        (folder / planted).write_text("x\n", encoding="utf-8")
    with pytest.raises(ReleaseError) as err:
        refuse_extra_files(Layout(tmp_path), folder)
    said = str(err.value)
    assert f"solutions/source/ch02_attention/{planted}" in said
    assert "holds only its notebook (ch02_attention.ipynb)" in said and "Move it out" in said


def test_what_nbgrader_ignores_by_default_is_allowed(tmp_path: Path) -> None:
    folder = source_copy(tmp_path)
    for name in (".ipynb_checkpoints", "__pycache__", "feedback"):
        (folder / name).mkdir()
        (folder / name / "junk.txt").write_text("x\n", encoding="utf-8")
    (folder / "old.pyc").write_bytes(b"\0")
    refuse_extra_files(Layout(tmp_path), folder)


def test_course_release_refuses_before_running_nbgrader(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = source_copy(tmp_path, "ch01_why_not_rnns")
    (folder / "utils.py").write_text("print('from the source folder')\n", encoding="utf-8")
    for part in ("solutions/course_ref", "solutions/hidden", "tests/specs"):
        shutil.copytree(REPO_ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    assert main(["--check", "--root", str(tmp_path)]) == 2
    said = capsys.readouterr().err
    assert "course release: solutions/source/ch01_why_not_rnns/utils.py: a source folder holds only its notebook" in said


def test_the_repository_keeps_nbgraders_default_ignore_list() -> None:
    """What the refusal allows is what nbgrader ignores; the repository's config adds nothing to that list
    (an added `*.py` or `course_lib` would make collect drop the learner's snapshot)."""
    assert NBGRADER_IGNORE == CourseDirectory().ignore
    config = PyFileConfigLoader("nbgrader_config.py", path=str(REPO_ROOT)).load_config()
    assert list(config.CourseDirectory.ignore) == NBGRADER_IGNORE
