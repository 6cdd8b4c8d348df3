"""`course capstone` in Chinese (COURSE_LANG=zh_CN, as in a tree released with --lang zh_CN): its --help and each
subcommand's, the progress line a run starts with, and the notice that `course verify` will not verify a pretrained
start or an ensemble, with no run of three English words outside option names, choices and identifiers; a message
left untranslated (planted by taking its catalog entry away) is caught. English stays as it was (the other capstone
tests read it)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course_admin.release import learner_tree
from course_lib.provided import i18n
from course_lib.provided.capstone import run, stages
from course_lib.provided.capstone.vocab import CharVocab
from course_lib.provided.layout import LAYOUT

# Words that are names, not English prose: the command's own, its models and presets, and tools named in help texts
NAMES = {"course", "capstone", "baselines", "pretrain", "finetune", "evaluate", "plot", "record", "torchrun", "lstm", "transformer", "quick", "cpu", "full", "learner", "reference",
         "cuda", "torch", "news", "reviews", "make", "lab", "check", "submit", "install", "jupyter"}
WORD = re.compile(r"[A-Za-z][a-z]*(?:'s)?")


def english_runs(text: str, least: int = 3, names: set[str] = NAMES) -> list[str]:
    """The runs of ``least`` or more English words in ``text`` (3 for help texts, which name options and choices
    in their sentences; 1 for what a run prints, whose numbers would split a sentence into short runs): a token is a word when it is plain letters (lower case
    or capitalised, not ALL CAPS or CamelCase: those are metavars and class names) and not one of ``names``;
    options (-h, --out), paths, files, numbers, code and every non-ASCII character break a run."""
    found, current = [], []
    for token in re.sub(r"[^\x00-\x7f]+", " | ", text).split():  # a Chinese character ends a run
        bare = token.strip("()[]{},;:.!?\"'")
        if WORD.fullmatch(bare) and bare.lower() not in names and not re.search(r"[-_/=`.\d]", token.strip(".,;:")):
            current.append(bare)
            continue
        if len(current) >= least:
            found.append(" ".join(current))
        current = []
    return found + ([" ".join(current)] if len(current) >= least else [])


def helps() -> dict[str, str]:
    """The --help of `course capstone` and of each subcommand, as printed."""
    parser = run.parser()
    sub = next(a for a in parser._actions if a.dest == "command")  # noqa: SLF001 - argparse's subparsers action
    return {"": parser.format_help(), **{name: p.format_help() for name, p in sub.choices.items()}}


@pytest.fixture
def zh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COURSE_LANG", "zh_CN")


def test_the_checker_finds_english_sentences_and_spares_names() -> None:
    assert english_runs("the quick preset: small model, minutes on 2 cores") == ["preset small model minutes on"]
    assert english_runs("--model transformer 训练谁的 TransformerClassifier：你的 course_lib（默认）") == []
    assert english_runs("usage: course capstone finetune [-h] [--out OUT] [--batch-size BATCH_SIZE]") == []


def test_every_help_is_chinese(zh: None) -> None:
    for name, text in helps().items():
        assert not english_runs(text), (name, english_runs(text), text)
        assert "用法：course capstone" in text and "显示这条帮助信息并退出" in text and "选项：" in text


def test_the_help_is_english_without_a_language(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COURSE_LANG", "en")
    text = helps()["finetune"]
    assert text.startswith("usage: course capstone finetune") and "\noptions:\n" in text
    assert "show this help message and exit" in text and "a pretrain run's folder to start from" in text


@pytest.mark.parametrize("message", ["no progress bar", run.SUBCOMMANDS["plot"], "show this help message and exit"])
def test_a_planted_untranslated_help_text_is_caught(zh: None, monkeypatch: pytest.MonkeyPatch, message: str) -> None:
    full = i18n.catalog("zh_CN")
    monkeypatch.setattr(i18n, "catalog", lambda lang: {k: v for k, v in full.items() if k != message})
    assert any(english_runs(text) for text in helps().values())


class Stop(Exception):
    """Raised in place of training: what a run says before it trains is all these tests read."""


@pytest.fixture
def no_training(monkeypatch: pytest.MonkeyPatch) -> None:
    def stop(*args: object, **kwargs: object) -> None:
        raise Stop

    monkeypatch.setattr(stages, "train", stop)


def start(out: Path, *options: str) -> None:
    """Run `course capstone finetune --quick ...` (lstm, the CPU) up to where it would train."""
    with pytest.raises(Stop):
        run.main(["finetune", "--quick", "--model", "lstm", "--device", "cpu", "--out", str(out), "--no-progress",
                  *options])


def test_a_run_starts_with_a_chinese_progress_line(zh: None, no_training: None, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    start(tmp_path)
    said = capsys.readouterr().out
    assert said.startswith("微调 lstm（") and "条评论" in said and "1 个线程（--threads）" in said, said
    assert not english_runs(said, 1) and "无法验证" not in said, said  # one seed from scratch on a CPU: verifiable


def test_the_progress_line_is_english_without_a_language(monkeypatch: pytest.MonkeyPatch, no_training: None,
                                                         tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COURSE_LANG", "en")
    start(tmp_path)
    said = capsys.readouterr().out
    assert said.startswith("finetune lstm (") and "reviews, 600 steps of 64, quick preset, on cpu, 1 thread" in said


def test_a_pretrained_start_is_told_before_it_trains_that_verify_cannot_verify_it(
        zh: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "pretrain-lstm-quick"  # no checkpoint: the run stops, after the notice, with a Chinese error
    empty.mkdir()
    CharVocab(["好"]).save(empty / "vocab.json")
    with pytest.raises(SystemExit, match="那里没有检查点"):
        run.main(["finetune", "--quick", "--model", "lstm", "--device", "cpu", "--out", str(tmp_path),
                  "--pretrained", str(empty)])
    said = capsys.readouterr().out
    assert said.startswith("注意：这次运行从预训练的编码器开始") and "“无法验证”" in said and "得分不受此影响" in said
    assert not english_runs(said, 1), said


def test_an_ensemble_is_told_too_in_english_as_well(monkeypatch: pytest.MonkeyPatch, no_training: None,
                                                    tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COURSE_LANG", "en")
    start(tmp_path, "--seeds", "3")
    said = capsys.readouterr().out
    assert said.startswith("notice: this run is an ensemble of 3 seeds (--seeds)") and '"not verifiable"' in said
    assert "add --seeds 1" in said and "points do not depend on it" in said
    monkeypatch.setenv("COURSE_LANG", "zh_CN")
    start(tmp_path, "--seeds", "3")
    assert capsys.readouterr().out.startswith("注意：这次运行是 3 个种子的集成模型（--seeds）")


def test_a_planted_untranslated_progress_line_is_caught(zh: None, no_training: None, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    full = i18n.catalog("zh_CN")
    monkeypatch.setattr(i18n, "catalog", lambda lang: {k: v for k, v in full.items() if not k.startswith("finetune {")})
    start(tmp_path)
    assert english_runs(capsys.readouterr().out, 1)


# ------------------------------------------------------------------ the capstone's README.zh_CN.md
CAPSTONE = LAYOUT.root / "course_lib" / "provided" / "capstone"


def test_the_chinese_readme_was_made_from_the_current_english() -> None:
    english = (CAPSTONE / "README.md").read_text(encoding="utf-8")
    first = (CAPSTONE / "README.zh_CN.md").read_text(encoding="utf-8").split("\n", 1)[0]
    assert first == learner_tree.translated_from(english), (
        "course_lib/provided/capstone/README.md changed since README.zh_CN.md was translated: translate the change, "
        f"then make its first line {learner_tree.translated_from(english)}")
    planted = english + "\nOne more sentence.\n"
    assert first != learner_tree.translated_from(planted)


def test_the_chinese_readme_is_chinese_prose() -> None:
    text = (CAPSTONE / "README.zh_CN.md").read_text(encoding="utf-8")
    prose = re.sub(r"```.*?```|`[^`\n]*`|<!--.*?-->", " ", text, flags=re.DOTALL)
    assert not english_runs(prose), english_runs(prose)
    assert english_runs(prose + "\nWhat each module does, measured here.\n"), "the check finds English"


def test_a_chinese_tree_ships_the_capstone_readme_in_chinese() -> None:
    rel = "course_lib/provided/capstone/README.md"
    files = [rel, "course_lib/provided/capstone/README.zh_CN.md", "course_lib/provided/capstone/run.py"]
    assert learner_tree._sources(LAYOUT.root, files, "zh_CN")[rel] == CAPSTONE / "README.zh_CN.md"
    assert learner_tree._sources(LAYOUT.root, files, "en")[rel] == CAPSTONE / "README.md"
    assert learner_tree._sources(LAYOUT.root, files, "zh_CN")[files[2]] == CAPSTONE / "run.py"


HELPS = """from course_lib.provided.cli import main
for argv in (["capstone", "--help"], ["capstone", "finetune", "--help"]):  # `course capstone --help`, as typed
    try:
        main(argv)
    except SystemExit:
        pass
    print("\\0", end="")
"""


def test_a_released_chinese_tree_speaks_chinese_without_being_told(tmp_path: Path) -> None:
    """As a learner meets it: a tree released with --lang zh_CN, no COURSE_LANG; its pyproject says the language.
    The capstone's --help and a subcommand's, its README, and `make check` without a chapter."""
    tree = tmp_path / "tree"
    learner_tree.export_learner_tree(LAYOUT.root, tree, lang="zh_CN")
    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_LANG", "MAKEFLAGS", "MAKELEVEL")}
    done = subprocess.run([sys.executable, "-c", HELPS], cwd=tree, capture_output=True, text=True, timeout=120,
                          env={**env, "PYTHONPATH": str(tree)})  # one process: torch is imported once
    helps = done.stdout.split("\0")[:-1]
    assert done.returncode == 0 and len(helps) == 2, done.stdout + done.stderr
    for text in helps:
        assert text.startswith("用法：course capstone") and not english_runs(text), text
    assert "# 结课项目提供的辅助模块" in (tree / "course_lib" / "provided" / "capstone" / "README.md").read_text("utf-8")
    if shutil.which("make"):
        (tree / "bin").mkdir()
        (tree / "bin" / "course").touch()  # newer than pyproject.toml: `make install` has nothing to do
        done = subprocess.run(["make", "-s", "--no-print-directory", "check", f"BIN={tree / 'bin'}"], cwd=tree,
                              capture_output=True, text=True, timeout=60, env=env)
        assert done.returncode == 2 and done.stdout == "哪一章？例如：make check CH=01\n", done.stdout + done.stderr


def test_a_gpu_run_is_told_too(zh: None, no_training: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    """verify re-trains on the grader's CPU (verify.recipe): a run on cuda is told so before it trains."""
    import torch

    from course_lib.provided.capstone import ensemble

    monkeypatch.setattr(ensemble, "pick_device", lambda name: torch.device("cuda"))
    start(tmp_path)
    said = capsys.readouterr().out
    assert said.startswith("注意：这次运行在 cuda 上训练") and "--device cpu" in said and not english_runs(said, 1), said
