"""`course release --learner-tree DIR --lang zh_CN`: a learner tree in Chinese, end to end for a chapter (set up from
its own README, a stub read, a planted wrong answer checked with Chinese messages, the capstone's --help, submitted)
with no English sentence in anything the walk reads (issue 42; the detector: solutions/tests/english.py), an
untranslated text of each kind planted into the tree caught, and its README held to the English one it was
translated from."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from course_admin.release import learner_tree
from course_admin.release.release import main as release
from course_admin.release.stubs import ReleaseError
from course_lib.provided import chapters, cli
from course_lib.provided.capstone import run
from course_lib.provided.layout import LAYOUT, REPO_ROOT

from ..english import commands_out, english_runs, prose_of
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


def said(done: subprocess.CompletedProcess) -> str:
    """What a command printed, its stdout and stderr."""
    return done.stdout + done.stderr


def leaks(texts: dict[str, str], tree: Path) -> dict[str, list[str]]:
    """{where: its English runs} of each text a learner read, the tree's own command lines cut out first (they are
    code: `course capstone` and its subcommands, `course` and the learner's, `make` and the Makefile's targets)."""
    targets = re.search(r"^\.PHONY:(.*)$", (tree / "Makefile").read_text(encoding="utf-8"), re.M)
    commands = {"course capstone": list(run.SUBCOMMANDS), "course": list(cli.LEARNER), "make": targets[1].split()}
    found = {where: english_runs(commands_out(text, commands)) for where, text in texts.items()}
    return {where: runs for where, runs in found.items() if runs}


def caught(text: str, english: str, tree: Path) -> bool:
    """Whether the detector finds in ``text`` a run with three words in a row of the planted ``english``."""
    def words(x: str) -> list[str]:
        return re.findall(r"[A-Za-z]+", x)
    planted = " " + " ".join(words(english)) + " "
    return any(f" {' '.join(w[i:i + 3])} " in planted for run in leaks({"": text}, tree).get("", [])
               if len(w := words(run)) >= 3 for i in range(len(w) - 2))


def plant_untranslated(tree: Path, stub: str) -> dict[str, tuple[str, str]]:
    """{kind: (what the learner reads, the English planted there)}: an untranslated text of each kind planted into
    the installed tree (``stub``: the Chinese stub of course_lib/attention.py), shown by what shows it, and every
    planted file restored after. No reinstall: the tree's .venv runs course_lib from the tree (`pip install -e`)."""
    catalog = tree / "course_lib" / "provided" / "locale" / "zh_CN.json"
    makefile, module = tree / "Makefile", tree / "course_lib" / "attention.py"
    kept = {path: path.read_bytes() for path in (catalog, makefile, module)}
    zh = json.loads(kept[catalog])
    message = "Chapter {number} — {title}: public checks on {who}"  # the title line of `make check`
    case = next(c.name for c in chapters.load_spec("02").CASES if english_runs(c.name) and c.name in zh)
    helped = run.SUBCOMMANDS["finetune"]
    which = re.search(r"^SAY_WHICH_en = (.*)$", kept[makefile].decode(), re.M)[1]  # "Which chapter? ..."
    sentence = "This docstring was left in English by mistake."
    assert all(english in zh for english in (message, case, helped)) and stub.count('"""') >= 2
    try:
        catalog.write_text(json.dumps({k: v for k, v in zh.items() if k not in (message, case, helped)},
                                      ensure_ascii=False, indent=1), encoding="utf-8")
        makefile.write_text(re.sub(r"^SAY_WHICH_zh = .*$", lambda _: f"SAY_WHICH_zh = {which}",
                                   kept[makefile].decode(), flags=re.M))
        checked = said(sh(tree, "make check CH=02"))
        module.write_text(stub.replace('"""', '"""' + sentence + " ", 1), encoding="utf-8")
        shown = {"learner message": (checked, message), "case name": (checked, case),
                 "capstone help text": (said(sh(tree, ".venv/bin/course capstone --help")), helped),
                 "stub docstring": (prose_of(module.read_text(encoding="utf-8")), sentence),
                 "Makefile message": (said(sh(tree, "make check")), which.replace("$(2)", "make check CH=01"))}
    finally:
        for path, data in kept.items():
            path.write_bytes(data)
    return shown


@pytest.mark.slow
def test_set_up_check_a_wrong_answer_and_submit_in_chinese(tree: Path) -> None:
    """The walk of a new learner, each text it reads free of English sentences; then one of each kind planted."""
    done = [sh(tree, command) for command in setup_commands((tree / "README.md").read_text(encoding="utf-8"))]
    assert done[0].returncode == 0, done[0].stdout[-2000:] + done[0].stderr[-2000:]
    stub = done[1]
    # make install's stdout: its commands and its message; its stderr is pip's and setuptools' own (English to
    # every learner, their warnings depending on the machine's pip configuration), no text of the course
    installed = re.search(r"^SAY_INSTALLED_zh := (.*)$", (tree / "Makefile").read_text(encoding="utf-8"), re.M)[1]
    assert installed in done[0].stdout, done[0].stdout[-1500:]
    texts = {"make install": done[0].stdout, "make check CH=01 (the stub)": said(stub)}
    assert stub.returncode != 0 and ZH["not implemented yet"] in stub.stdout, stub.stdout[-1500:]
    title = ZH[chapters.load_spec("01").TITLE]
    assert ZH["Chapter {number} — {title}: public checks on {who}"].format(
        number="01", title=title, who=ZH["your course_lib"]) in stub.stdout
    source = (tree / "course_lib" / "attention.py").read_text(encoding="utf-8")  # the stub, as a learner reads it
    texts["course_lib/attention.py: its docstrings, comments and messages"] = prose_of(source)
    assert "第 02 章：请在 course_lib/attention.py 中实现" in prose_of(source), "the NotImplementedError hint"
    texts["make check (no chapter)"] = said(sh(tree, "make check"))
    for argv in ("capstone --help", "capstone finetune --help"):
        helped = sh(tree, f".venv/bin/course {argv}")
        assert helped.returncode == 0 and ZH["show this help message and exit"] in helped.stdout, said(helped)
        texts[f"course {argv}"] = said(helped)
    # softmax over the queries, not the keys: chapter 02's known mistake, explained in Chinese
    assert "torch.softmax(scores, dim=-1)" in REFERENCE
    (tree / "course_lib" / "attention.py").write_text(REFERENCE.replace("torch.softmax(scores, dim=-1)",
                                                                        "torch.softmax(scores, dim=-2)"))
    check = sh(tree, "make check CH=02")
    texts["make check CH=02 (a wrong answer)"] = said(check)
    explanation = ZH[next(m for m in ZH if m.startswith("Softmax over the wrong axis"))]
    assert check.returncode != 0 and explanation[:20] in check.stdout.replace("\n", ""), check.stdout[-2000:]
    assert ZH["FAIL"] in check.stdout and ZH["total"] in check.stdout
    assert "Softmax over the wrong axis" not in check.stdout, "no English left where a translation exists"
    handed = sh(tree, "make submit CH=02 LEARNER=ada")
    texts["make submit CH=02"] = said(handed)
    assert handed.returncode == 0, handed.stdout + handed.stderr
    assert ZH["learner: {learner} ({source})"].split("{")[0] in handed.stdout
    assert ZH["hand in this file: {path}"].split("{")[0] in handed.stdout
    with zipfile.ZipFile(tree / "submissions" / "ada_ch02.zip") as zf:
        assert "course_lib/attention.py" in zf.namelist()
    left = leaks(texts, tree)
    assert all(texts.values()) and not left, "English where a Chinese learner reads, by where: " + json.dumps(
        left, ensure_ascii=False)
    for kind, (text, english) in plant_untranslated(tree, source).items():
        assert caught(text, english, tree), f"a planted untranslated {kind} ({english!r}) went unseen: {text[-1500:]}"
