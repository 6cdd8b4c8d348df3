"""`course release --learner-tree DIR --lang zh_CN`: a learner tree in Chinese, end to end for a chapter (set up from
its own README, a planted wrong answer checked with Chinese messages, submitted), and its README held to the English
one it was translated from."""
from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest

from course_admin.release import learner_tree
from course_admin.release.release import main as release
from course_admin.release.stubs import ReleaseError
from course_lib.provided import chapters
from course_lib.provided.layout import LAYOUT, REPO_ROOT

from .conftest import GROUP
from .test_learner_tree import REFERENCE, setup_commands, sh

pytestmark = [pytest.mark.install, GROUP]

ZH = json.loads((REPO_ROOT / "course_lib" / "provided" / "locale" / "zh_CN.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def tree(shared_tree) -> Path:
    """The Chinese learner tree, released into the session's folder (conftest.py: its .venv is shared)."""
    return shared_tree.released("zh")


def test_the_tree_says_its_language_and_its_readme_is_chinese(tree: Path) -> None:
    assert 'language = "zh_CN"' in (tree / "pyproject.toml").read_text()
    readme = (tree / "README.md").read_text(encoding="utf-8")
    assert readme.startswith("# 从零实现 Transformer") and "<!-- translated" not in readme
    assert "{chapter_table}" not in readme and "| NN | 章 |" in readme
    assert setup_commands(readme) == ["make install", "make check CH=01"]
    assert "中文在后" in (tree / "AGENTS.md").read_text(encoding="utf-8")


def test_the_tree_has_the_chinese_exercise_notebooks_and_no_english_ones(tree: Path) -> None:
    for folder in sorted((LAYOUT.root / "exercises_zh_CN").iterdir()):
        notebook = tree / "exercises" / folder.name / f"{folder.name}.ipynb"
        assert notebook.read_bytes() == (folder / notebook.name).read_bytes()
        first = "".join(json.loads(notebook.read_text(encoding="utf-8"))["cells"][0]["source"])
        assert first.startswith(f"# 第 {folder.name[2:4]} 章") and "评分内容" in first, first[:200]
    assert not any(p.name.startswith("exercises_") for p in tree.iterdir()), "the editions' folders stay behind"


def test_the_chinese_readme_was_made_from_the_current_english() -> None:
    english = (LAYOUT.root / "solutions" / "learner" / "README.md").read_text(encoding="utf-8")
    chinese = learner_tree.template_of(LAYOUT.root, "README.md", "zh_CN").read_text(encoding="utf-8")
    assert chinese.split("\n", 1)[0] == learner_tree.translated_from(english), (
        "solutions/learner/README.md changed since README.zh_CN.md was translated: translate the change, then "
        f"make its first line {learner_tree.translated_from(english)}")


def test_a_planted_change_to_the_english_readme_stops_the_release(tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(LAYOUT.root / "solutions" / "learner", root / "solutions" / "learner")
    readme = root / "solutions" / "learner" / "README.md"
    readme.write_text(readme.read_text(encoding="utf-8") + "\nOne more sentence.\n", encoding="utf-8")
    with pytest.raises(ReleaseError, match="README.zh_CN.md was translated from another README.md"):
        learner_tree.own_version(root, "README.md", None, "zh_CN")
    assert learner_tree.own_version(root, "README.md", None, "en")  # English alone is unaffected


def test_an_unknown_language_is_refused_with_the_ones_there_are(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        release(["--learner-tree", "/nonexistent/x", "--lang", "fr"])
    assert "unknown language 'fr'" in capsys.readouterr().err


@pytest.mark.slow
def test_set_up_check_a_wrong_answer_and_submit_in_chinese(tree: Path) -> None:
    done = [sh(tree, command) for command in setup_commands((tree / "README.md").read_text(encoding="utf-8"))]
    assert done[0].returncode == 0, done[0].stdout[-2000:] + done[0].stderr[-2000:]
    stub = done[1]
    assert stub.returncode != 0 and ZH["not implemented yet"] in stub.stdout, stub.stdout[-1500:]
    title = ZH[chapters.load_spec("01").TITLE]
    assert ZH["Chapter {number} — {title}: public checks on {who}"].format(
        number="01", title=title, who=ZH["your course_lib"]) in stub.stdout
    # softmax over the queries, not the keys: chapter 02's known mistake, explained in Chinese
    assert "torch.softmax(scores, dim=-1)" in REFERENCE
    (tree / "course_lib" / "attention.py").write_text(REFERENCE.replace("torch.softmax(scores, dim=-1)",
                                                                        "torch.softmax(scores, dim=-2)"))
    check = sh(tree, "make check CH=02")
    explanation = ZH[next(m for m in ZH if m.startswith("Softmax over the wrong axis"))]
    assert check.returncode != 0 and explanation[:20] in check.stdout.replace("\n", ""), check.stdout[-2000:]
    assert ZH["FAIL"] in check.stdout and ZH["total"] in check.stdout
    assert "Softmax over the wrong axis" not in check.stdout, "no English left where a translation exists"
    handed = sh(tree, "make submit CH=02 LEARNER=ada")
    assert handed.returncode == 0, handed.stdout + handed.stderr
    assert ZH["learner: {learner} ({source})"].split("{")[0] in handed.stdout
    assert ZH["hand in this file: {path}"].split("{")[0] in handed.stdout
    with zipfile.ZipFile(tree / "submissions" / "ada_ch02.zip") as zf:
        assert "course_lib/attention.py" in zf.namelist()
