"""`course release --learner-tree DIR`: the learners' course folder works on its own and holds no secret.

The tree is exported into a temporary folder (shared with the Chinese tree's test: conftest.py) and walked as a
new learner would: the set-up commands of its own README (a fresh .venv, the learner's pyproject), then `make check` on the stub (0 points) and
on the reference copied in (full marks), `make test` (one line per failure), and `make submit` (who you
are, the score, the warnings, the file to hand in, refused chapters, no silent overwrite). About 1-2 min:
`make install` builds a virtual environment.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from course_admin.release.learner_tree import INSTRUCTOR_ONLY
from course_admin.release.release import main as release
from course_lib.provided import syllabus
from course_lib.provided.layout import LAYOUT, REPO_ROOT, modules_for

from .conftest import GROUP

pytestmark = [pytest.mark.install, GROUP]

REFERENCE = (LAYOUT.reference / "attention.py").read_text(encoding="utf-8")


def run(tree: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=tree, capture_output=True, text=True, timeout=300)


def sh(tree: Path, command: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """A README command as a learner types it, with none of this suite's environment leaking in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON", "COURSE_"))}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p)
    return subprocess.run(command, shell=True, cwd=tree, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)


def setup_commands(readme: str) -> list[str]:
    """The commands of the README's "Set up" section (安装与设置 in Chinese), in order."""
    section = re.split(r"^## (?:Set up|安装与设置)", readme, maxsplit=1, flags=re.M)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "the learner README's set-up section has no ```bash block"
    return [line.strip() for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]


@pytest.fixture(scope="module")
def tree(shared_tree) -> Path:
    """The English learner tree, released into the session's folder (conftest.py: its .venv is shared)."""
    return shared_tree.released("en")


@pytest.fixture(scope="module")
def installed(tree: Path) -> tuple[Path, list[subprocess.CompletedProcess]]:
    """The tree after its README's set-up commands (a fresh .venv), with what each printed."""
    done = [sh(tree, command) for command in setup_commands((tree / "README.md").read_text())]
    return tree, done


def test_nothing_of_the_instructor_is_in_the_tree(tree: Path) -> None:
    shipped = [p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file()]
    shipped = [p for p in shipped if not p.startswith(".venv/")]  # made by make install (conftest.py), not shipped
    assert shipped and not [p for p in shipped if p.startswith(INSTRUCTOR_ONLY)]
    for needed in ("course_lib/attention.py", "course_lib/provided/check.py", "tests/specs/ch02.py",
                   "tests/reference/ch02.pt", "exercises/ch02_attention/ch02_attention.ipynb", "README.md",
                   "Makefile", "pyproject.toml"):
        assert needed in shipped, needed


def test_the_tree_tells_ai_assistants_to_teach_not_to_solve(tree: Path) -> None:
    agents = (tree / "AGENTS.md").read_text(encoding="utf-8")
    english, chinese = agents.split("\n---\n", 1)
    for text in (english, chinese):                               # both languages name the same rules
        assert "`course_lib/`" in text and "`course_lib/provided/`" in text and "NotImplementedError" in text
        assert "make check CH=NN" in text
    assert "Do not" in english and "guiding questions" in english and "chapter 02" in english
    assert "不要" in chinese and "引导性问题" in chinese and "第 02 章" in chinese
    readme = (tree / "README.md").read_text(encoding="utf-8")
    assert "## Using an AI assistant" in readme and "`AGENTS.md`" in readme and "Why:" in readme


def test_the_tree_has_its_own_readme_pyproject_and_makefile(tree: Path) -> None:
    readme = (tree / "README.md").read_text()
    assert readme.startswith("# Transformers from Scratch: your course folder")
    assert "make book" not in readme and "solutions" not in readme and not re.search(r"\{\w+\}", readme)
    assert "| 02 | Attention |" in readme and "**ready**" in readme
    assert setup_commands(readme) == ["make install", "make check CH=01"]
    pyproject = (tree / "pyproject.toml").read_text()
    assert "solutions" not in pyproject and "course_admin" not in pyproject
    assert "solutions" not in (tree / "Makefile").read_text()


def test_set_up_from_the_readme_then_check_the_stub(installed) -> None:
    tree, (install, check) = installed
    assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-2000:]
    assert (tree / ".venv" / "bin" / "course").is_file()
    assert check.returncode != 0 and "not implemented yet" in check.stdout, check.stdout + check.stderr
    assert f"checked: {tree / 'course_lib'}" in check.stdout, "course check names the folder it checked"


# `course check chNN --json` of every ready chapter on the stubs, in one Python of the tree's .venv (a command each
# cost a fresh Python and torch, 2-3 s, eight times): what each printed and its exit status, as the console script
# `course` gives them (course_lib.provided.cli.main, with the same argument list).
EVERY_STUB = """import contextlib, io, json, sys
from course_lib.provided import cli
found = {}
for number in sys.argv[1:]:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        try:
            code = cli.main(["check", "ch" + number, "--json"])
        except SystemExit as stop:
            code = stop.code
    found[number] = {"returncode": code, "stdout": printed.getvalue()}
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def stubs_checked(installed) -> dict[str, dict]:
    """Each ready chapter's check on the released stubs: {number: {"returncode", "stdout"}}."""
    tree, _ = installed
    numbers = [c.number for c in syllabus.ready()]
    done = sh(tree, f".venv/bin/python -c {shlex.quote(EVERY_STUB)} {' '.join(numbers)}")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("chapter", [c.number for c in syllabus.ready()])
def test_every_ready_chapter_checks_in_the_tree(installed, stubs_checked, chapter: str) -> None:
    """Each chapter's stub scores 0 with "not implemented yet"; with the chapter's modules solved, full marks."""
    tree, _ = installed
    stubbed = stubs_checked[chapter]
    assert stubbed["returncode"] == 1 and "not implemented yet" in stubbed["stdout"], stubbed
    solved = {m: (LAYOUT.reference / m).read_text() for m in modules_for(chapter)}
    stubs = {m: (tree / "course_lib" / m).read_text() for m in solved}
    try:
        for module, text in solved.items():
            (tree / "course_lib" / module).write_text(text)
        passed = sh(tree, f"make check CH={chapter}")
        assert passed.returncode == 0 and "All public checks pass" in passed.stdout, passed.stdout + passed.stderr
    finally:
        for module, text in stubs.items():
            (tree / "course_lib" / module).write_text(text)


@pytest.mark.slow
def test_make_test_is_one_line_per_failure(installed) -> None:
    tree, _ = installed
    proc = sh(tree, "make test")
    assert proc.returncode != 0 and "not implemented yet" in proc.stdout
    assert "Traceback" not in proc.stdout and "def scaled_dot_product_attention" not in proc.stdout
    failed = proc.stdout.count("FAILED ")
    assert failed and len(proc.stdout.splitlines()) < 4 * failed + 10, proc.stdout


def test_reference_impl_is_a_one_line_error_in_the_tree(installed) -> None:
    tree, _ = installed
    proc = sh(tree, ".venv/bin/course check ch02 --impl reference")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "instructor" in proc.stderr


def test_instructor_commands_say_so(installed) -> None:
    tree, _ = installed
    proc = sh(tree, ".venv/bin/course grade x --out y")
    assert proc.returncode == 2 and "instructor" in proc.stderr


def test_solved_then_submitted(installed) -> None:
    tree, _ = installed
    stub = (tree / "course_lib" / "attention.py").read_text()
    (tree / "course_lib" / "attention.py").write_text(REFERENCE)
    try:
        _solved_then_submitted(tree)
    finally:
        (tree / "course_lib" / "attention.py").write_text(stub)
        shutil.rmtree(tree / "submissions", ignore_errors=True)
        (tree / ".course-learner").unlink(missing_ok=True)


def _solved_then_submitted(work: Path) -> None:
    check = sh(work, "make check CH=02")
    assert check.returncode == 0 and "All public checks pass" in check.stdout, check.stdout + check.stderr
    anonymous = sh(work, "make submit CH=02")
    assert anonymous.returncode != 0 and "LEARNER=<your id>" in anonymous.stderr
    first = sh(work, "make submit CH=02 LEARNER=ada")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "learner: ada" in first.stdout and "points (all pass)" in first.stdout
    assert "written answer(s) still read" in first.stdout  # the notebook is the untouched release
    handed = work / "submissions" / "ada_ch02.zip"
    assert f"hand in this file: {handed}" in first.stdout
    with zipfile.ZipFile(handed) as zf:
        assert {"manifest.json", "course_lib/attention.py", "ch02_attention.ipynb"} <= set(zf.namelist())
    again = sh(work, "make submit CH=02")
    assert again.returncode != 0 and "exists already" in again.stderr and "learner: ada" in again.stdout
    assert sh(work, "make submit CH=02 FORCE=1").returncode == 0
    planned = [c.number for c in syllabus.SYLLABUS if not c.ready()]
    with_checks = "chapters with checks: " + ", ".join(f"ch{c.number}" for c in syllabus.ready())
    for chapter in ("99", *planned[-1:]):
        refused = sh(work, f".venv/bin/course submit ch{chapter} --no-notebook")
        assert refused.returncode == 2 and with_checks in refused.stderr, refused.stderr


def test_stub_submission_warns(installed, tmp_path: Path) -> None:
    tree, _ = installed
    proc = sh(tree, f".venv/bin/course submit ch02 --learner bo --out {tmp_path}")
    assert proc.returncode == 0, proc.stderr
    assert "scaled_dot_product_attention is still the stub" in proc.stdout
    assert "0/" in proc.stdout and "make check CH=02" in proc.stdout
    (tree / ".course-learner").unlink()


def test_checks_run_on_the_learners_code_without_install(tree: Path) -> None:
    """With the instructor's interpreter, in the tree: still the tree's own course_lib."""
    stub = run(tree, "-m", "course_lib.provided.cli", "check", "ch02")
    assert stub.returncode == 1 and "not implemented yet" in stub.stdout


def test_refuses_a_folder_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    assert release(["--learner-tree", str(tmp_path)]) == 2
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_the_readme_points_to_the_book() -> None:
    from course_admin.release.learner_tree import own_version

    url = "https://example.org/transformers"
    linked = own_version(REPO_ROOT, "README.md", url + "/")
    assert f"<{url}/>" in linked
    for chapter in syllabus.ready():
        assert f"| {chapter.number} | [{chapter.title}]({url}/book/{chapter.page}.html) |" in linked
    unlinked = own_version(REPO_ROOT, "README.md")
    assert "your instructor gives you its address" in unlinked and "](http" not in unlinked
    # each edition's README links its own edition's PDF, where publish.yml puts it (course_admin/publish/pdf.py)
    from course_admin.publish import pdf
    for lang, edition in (("en", "en"), ("zh_CN", "zh_CN")):
        readme = own_version(REPO_ROOT, "README.md", url + "/", lang)
        assert f"]({url}/pdf/{pdf.EDITIONS[edition][0]})" in readme, lang
        assert "/pdf/" not in own_version(REPO_ROOT, "README.md", None, lang)


def test_the_readme_lists_the_capstone_commands_with_measured_times() -> None:
    """Every capstone command of the notebook's question, with the measured minutes (CPU seconds, rounded up)."""
    import json
    import math

    from course_admin.release import capstone_times
    from course_admin.release.learner_tree import own_version

    readme = own_version(REPO_ROOT, "README.md")
    record = json.loads((REPO_ROOT / "solutions" / "learner" / "capstone_times.json").read_text(encoding="utf-8"))
    for run in capstone_times.RUNS:
        minutes = max(1, math.ceil(record["runs"][run.key]["cpu_seconds"] / 60))
        assert f"| `{capstone_times.command(run)}` | {run.what} | about {minutes} min |" in readme
    assert "--allow-root" in readme  # what make lab does as root
