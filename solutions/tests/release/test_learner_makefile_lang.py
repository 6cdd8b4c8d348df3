"""The learner Makefile speaks the tree's language (solutions/learner/Makefile): "Which chapter?", "Installed. Next:"
and `make lab`'s root notice are Chinese in a tree released with --lang zh_CN (pyproject's [tool.course] language),
English otherwise or under COURSE_LANG=en, read as course_lib/provided/i18n.py reads it. The recipes run for real in
a scratch folder, with stand-ins for python, course and jupyter (BIN and PYTHON on the command line)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from course_lib.provided.layout import REPO_ROOT

from ..capstone.test_capstone_zh import NAMES, english_runs

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
MAKEFILE = REPO_ROOT / "solutions" / "learner" / "Makefile"
ZH_SETTING = '\n[tool.course]\n# the language\nlanguage = "zh_CN"\n'


def tree(folder: Path, zh: bool) -> Path:
    """A learner tree's Makefile and pyproject.toml, with a BIN whose `course` is up to date (install does nothing)."""
    folder.mkdir()
    shutil.copy(MAKEFILE, folder / "Makefile")
    (folder / "pyproject.toml").write_text('[project]\nname = "x"\n' + (ZH_SETTING if zh else ""), encoding="utf-8")
    (folder / "constraints-cpu.txt").touch()
    (folder / "bin").mkdir()
    for name, body in (("jupyter", 'echo "jupyter called with: $*"'), ("python", "exit 0")):
        (folder / "bin" / name).write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
        (folder / "bin" / name).chmod(0o755)
    (folder / "bin" / "course").touch()
    later = (folder / "pyproject.toml").stat().st_mtime + 10
    os.utime(folder / "bin" / "course", (later, later))
    return folder


def make(folder: Path, *args: str, lang: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_LANG", "MAKEFLAGS", "MAKELEVEL")}
    env.update({"COURSE_LANG": lang} if lang else {})
    return subprocess.run(["make", "--no-print-directory", "-s", *args, f"BIN={folder / 'bin'}", "PYTHON=true"],
                          cwd=folder, capture_output=True, text=True, timeout=60, env=env)


def messages(folder: Path, lang: str | None = None) -> dict[str, str]:
    """What `make check` and `make submit` without CH, `make lab` as root and `make install` print."""
    said = {"check": make(folder, "check", lang=lang), "submit": make(folder, "submit", lang=lang),
            "lab": make(folder, "lab", "LAB_UID=0", lang=lang)}
    assert said["check"].returncode == said["submit"].returncode == 2 and said["lab"].returncode == 0, said
    (folder / "bin" / "course").unlink()  # out of date: `make install` runs its recipe (stand-ins) and says so
    said["install"] = make(folder, "install", lang=lang)
    assert said["install"].returncode == 0, said["install"].stderr
    return {name: done.stdout for name, done in said.items()}


def test_a_chinese_tree_says_it_in_chinese(tmp_path: Path) -> None:
    said = messages(tree(tmp_path / "zh", zh=True))
    assert said["check"] == "哪一章？例如：make check CH=01\n" and said["submit"] == "哪一章？例如：make submit CH=01\n"
    assert said["lab"].startswith("make lab：你是 root 用户") and "jupyter called with: lab --allow-root" in said["lab"]
    assert said["install"].startswith("安装完成。下一步：make check CH=01")
    for name, text in said.items():
        assert not english_runs(text.replace("jupyter called with", ""), 1, NAMES | {"root", "uid", "colab"}), text


def test_an_english_tree_and_course_lang_en_say_it_in_english(tmp_path: Path) -> None:
    english = messages(tree(tmp_path / "en", zh=False))
    assert english == messages(tree(tmp_path / "zh", zh=True), lang="en"), "COURSE_LANG comes before pyproject"
    assert english["check"] == "Which chapter? For example: make check CH=01\n"
    assert english["install"] == ("Installed. Next: make check CH=01 (the checks of chapter 01 on your code), make lab "
                                  "(the notebooks).\n")
    assert english["lab"].startswith("make lab: you are root (uid 0), as in containers, Colab and many cloud "
                                     "machines: starting JupyterLab with --allow-root, which lets it run as root")
    assert english_runs(english["check"], 1) and english_runs(english["lab"]), "the check finds English sentences"
    assert messages(tree(tmp_path / "zh2", zh=True), lang="zh_CN")["check"].startswith("哪一章")
