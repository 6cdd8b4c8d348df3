"""`course release`: learners' files are generated from solutions/, stay in sync, and leak nothing.

Run with `.venv/bin/python -m pytest solutions/tests/release/test_release.py` (about 30 s: nbgrader and a kernel run).
"""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_lib.provided.layout import REPO_ROOT
from course_lib.provided.preflight import ANSWER_PLACEHOLDER

from course_admin.release.release import main
from course_admin.release.stubs import ReleaseError

SOLUTION_MODULES = sorted(p for p in (REPO_ROOT / "solutions" / "course_ref").glob("*.py") if p.name != "__init__.py")
# The English notebooks and the Chinese edition's (solutions/source_zh_CN/, exercises_zh_CN/): the model answers of
# both are secrets, and both releases are what learners receive.
SOURCE_NOTEBOOKS = sorted(p for folder in ("source", "source_zh_CN")
                          for p in (REPO_ROOT / "solutions" / folder).glob("ch[0-9][0-9]_*/*.ipynb"))
RELEASED_NOTEBOOKS = sorted(p for folder in ("exercises", "exercises_zh_CN")
                            for p in (REPO_ROOT / folder).glob("ch[0-9][0-9]_*/*.ipynb"))
CH02_SOURCE = REPO_ROOT / "solutions" / "source" / "ch02_attention" / "ch02_attention.ipynb"
CH02_RELEASE = REPO_ROOT / "exercises" / "ch02_attention" / "ch02_attention.ipynb"


def snapshot(root: Path) -> dict[str, str]:
    """Hash of every file release manages or reads, to prove a command left them alone."""
    found = {}
    for folder in ("course_lib", "exercises", "solutions/course_ref", "solutions/source", "exercises_zh_CN",
                   "solutions/source_zh_CN", "solutions/locale"):
        for path in sorted((root / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and ".ipynb_checkpoints" not in path.parts:
                found[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


# ------------------------------------------------------------------ (a) the committed tree is in sync
def test_release_check_says_in_sync(capsys):
    before = snapshot(REPO_ROOT)
    assert main(["--check"]) == 0, capsys.readouterr().out
    assert "in sync" in capsys.readouterr().out
    assert snapshot(REPO_ROOT) == before, "--check must never write to the tree"


# ------------------------------------------------------------------ (b) stale files are found, then fixed
def copy_of_repo(dest: Path) -> Path:
    """The parts of the repository that `course release` reads and writes, copied to ``dest``."""
    for folder in ("solutions/course_ref", "solutions/source", "solutions/hidden", "solutions/learner", "tests/specs",
                   "exercises", "solutions/locale", "solutions/source_zh_CN", "exercises_zh_CN"):
        shutil.copytree(REPO_ROOT / folder, dest / folder, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    (dest / "course_lib").mkdir()
    for stub in (REPO_ROOT / "course_lib").glob("*.py"):
        shutil.copyfile(stub, dest / "course_lib" / stub.name)
    return dest


@pytest.mark.slow  # three releases of a copy
def test_check_finds_planted_stale_files_and_release_fixes_them(tmp_path, capsys):
    repo_before = snapshot(REPO_ROOT)
    root = copy_of_repo(tmp_path / "repo")
    stub = root / "course_lib" / "attention.py"
    stub.write_text(stub.read_text(encoding="utf-8") + "\nx = 1  # a learner-side edit in the generated stub\n", encoding="utf-8")
    released = root / "exercises" / "ch02_attention" / "ch02_attention.ipynb"
    nb = json.loads(released.read_text(encoding="utf-8"))
    nb["cells"][0]["source"] = ["stale lead-in"]
    released.write_text(json.dumps(nb), encoding="utf-8")
    source = root / "solutions" / "source" / "ch02_attention" / "ch02_attention.ipynb"
    typed = source.read_text(encoding="utf-8").replace("What is graded: ", "What is graded: 10 points (typed), ")
    source.write_text(typed, encoding="utf-8")  # a number typed into the generated block
    extra = root / "exercises" / "ch02_attention" / "leftover.txt"
    extra.write_text("not generated", encoding="utf-8")
    planted = snapshot(root)

    assert main(["--check", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert "stale: course_lib/attention.py" in out
    assert "stale: exercises/ch02_attention/ch02_attention.ipynb" in out
    assert "exercises/ch02_attention/leftover.txt" in out
    assert "stale: solutions/source/ch02_attention/ch02_attention.ipynb" in out
    assert "in sync" not in out
    assert snapshot(root) == planted, "--check changed the tree it checked"

    assert main(["--root", str(root)]) == 0
    capsys.readouterr()
    assert stub.read_bytes() == (REPO_ROOT / "course_lib" / "attention.py").read_bytes()
    assert released.read_bytes() == CH02_RELEASE.read_bytes()
    assert source.read_bytes() == CH02_SOURCE.read_bytes() and "(typed)" not in source.read_text(encoding="utf-8")
    assert not extra.exists()
    assert snapshot(REPO_ROOT) == repo_before, "a test on a copy changed the repository"


@pytest.mark.slow  # three releases of a copy
def test_an_english_change_without_its_translation_leaves_the_chinese_edition_behind(tmp_path, capsys):
    root = copy_of_repo(tmp_path / "repo")
    source = root / "solutions" / "source" / "ch02_attention" / "ch02_attention.ipynb"
    text = source.read_text(encoding="utf-8")
    assert "Run this cell first." in text
    source.write_text(text.replace("Run this cell first.", "Run this cell first, once."), encoding="utf-8")
    zh = root / "exercises_zh_CN" / "ch02_attention" / "ch02_attention.ipynb"
    zh_before = zh.read_bytes()

    assert main(["--check", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert "not in sync with its English, so not generated: exercises_zh_CN/ch02_attention/" in out
    assert "stale: exercises/ch02_attention/ch02_attention.ipynb" in out
    assert "exercises_zh_CN/ch03" not in out, "only the changed notebook's edition is behind"

    assert main(["--root", str(root)]) == 0  # the English is released; the Chinese is left as it was, loudly
    captured = capsys.readouterr()
    assert "WARNING: exercises_zh_CN/ch02_attention/ not regenerated" in captured.err
    assert "stale: cell 'setup-md'" in captured.err
    assert "once." in (root / "exercises" / "ch02_attention" / "ch02_attention.ipynb").read_text(encoding="utf-8")
    assert zh.read_bytes() == zh_before
    assert main(["--check", "--root", str(root)]) == 1, "the edition stays behind until it is translated"


# ------------------------------------------------------------------ (c) no solution line reaches learners
# The rule for a "telling" line. Each line is stripped and its runs of blanks collapsed; in code, a
# trailing `# comment` is dropped (the same code with another comment is the same leak). A line is
# skipped when it is blank, a comment, a marker, an import (imports reveal nothing and every file has
# them), shorter than 12 characters (`])`, `else:`), or made of names and keywords only, with no
# operator, call or literal: control-flow skeletons such as `if mask is not None:` or
# `return output, weights` say nothing that the docstring does not. Every other line of a solution
# block, a hidden-test block or a model answer counts, and must not occur in any file learners
# receive, anywhere in a line but not as the tail of a longer name (`bad_weights = ...` in the book's
# demonstration of a wrong fill is not `weights = ...`).
MARKER = re.compile(r"(BEGIN|END) (SOLUTION|HIDDEN TESTS|MARK SCHEME)")
NAMES_ONLY = re.compile(r"^[A-Za-z_][\w\s,.]*:?$")


def normalise(line: str, code: bool) -> str:
    if code:
        line = re.sub(r"\s+#.*$", "", line) if not line.lstrip().startswith("#") else ""
    return " ".join(line.split())


def telling(line: str, code: bool) -> str | None:
    text = normalise(line, code)
    if (not text or MARKER.search(line) or len(text) < 12 or NAMES_ONLY.match(text)
            or re.match(r"(import|from)\s+[\w.]+(\s+import\b|\s+as\b|$)", text)):
        return None
    return text


def regions(source: str, kinds: tuple[str, ...]) -> list[str]:
    """Lines strictly between `BEGIN <kind>` and `END <kind>` marker lines."""
    inside, found = False, []
    for line in source.splitlines():
        if any(f"BEGIN {kind}" in line for kind in kinds):
            inside = True
        elif any(f"END {kind}" in line for kind in kinds):
            inside = False
        elif inside:
            found.append(line)
    return found


def secret_lines() -> dict[str, str]:
    """{telling line: where it comes from} for every solution body, hidden test and model answer."""
    secrets: dict[str, str] = {}
    for path in SOLUTION_MODULES:
        for line in regions(path.read_text(encoding="utf-8"), ("SOLUTION",)):
            if (text := telling(line, code=True)):
                secrets[text] = path.relative_to(REPO_ROOT).as_posix()
    for path in SOURCE_NOTEBOOKS:
        for cell in nbformat.read(path, as_version=4).cells:
            code = cell.cell_type == "code"
            meta = cell.metadata.get("nbgrader", {})
            lines = regions(cell.source, ("SOLUTION", "HIDDEN TESTS", "MARK SCHEME"))
            if meta.get("solution") and not MARKER.search(cell.source):
                lines = cell.source.splitlines()  # nbgrader replaces a whole solution cell without markers
            for line in lines:
                if (text := telling(line, code)):
                    secrets[text] = f"{path.relative_to(REPO_ROOT).as_posix()} cell {cell.get('id')}"
    return secrets


def learner_files() -> list[Path]:
    """Every file learners receive: git's files outside solutions/ (tracked, or new and not ignored)."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                            cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout.split("\0")
    files = {REPO_ROOT / p for p in listed if p and not p.startswith("solutions/")}
    files.update(RELEASED_NOTEBOOKS)
    return sorted(p for p in files if p.is_file())


def learner_lines(path: Path) -> list[str]:
    if path.suffix == ".ipynb":
        nb = nbformat.read(path, as_version=4)
        lines = [line for cell in nb.cells for line in cell.source.splitlines()]
        lines += [line for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])
                  for line in (out.get("text", "") + "\n".join(out.get("traceback", []))).splitlines()]
    else:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError:
            return []  # binary (reference tensors)
    return [" ".join(line.split()) for line in lines]


def leaks(secrets: dict[str, str], files: list[Path]) -> list[str]:
    found = []
    for path in files:
        for number, line in enumerate(learner_lines(path), 1):
            for secret, origin in secrets.items():  # a substring first: the pattern only where it can match
                if secret in line and re.search(r"(?<![\w.])" + re.escape(secret), line):
                    found.append(f"{path.relative_to(REPO_ROOT)}:{number} repeats {secret!r} from {origin}")
    return found


def test_no_solution_or_hidden_test_line_reaches_learners():
    secrets = secret_lines()
    origins = set(secrets.values())
    assert any(o.startswith("solutions/course_ref/") for o in origins), "no solution body found: the rule is vacuous"
    assert any("cell answer-" in o for o in origins), "no model answer found: the rule is vacuous"
    files = learner_files()
    assert REPO_ROOT / "course_lib" / "attention.py" in files and CH02_RELEASE in files
    assert leaks(secrets, files) == []


def test_leak_detector_finds_a_planted_leak(tmp_path):
    secrets = secret_lines()
    body = next(s for s, o in secrets.items() if o.startswith("solutions/course_ref/"))
    hidden = next(s for s, o in secrets.items() if "cell answer-" in o)  # a model answer
    planted = tmp_path / "course_lib_copy.py"
    planted.write_text(f"def f():\n        {body}   # re-indented, other comment\n", encoding="utf-8")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"My answer.\n{hidden}")])
    nbformat.write(notebook, tmp_path / "leaky.ipynb")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys.modules[__name__], "REPO_ROOT", tmp_path)
        found = leaks(secrets, [planted, tmp_path / "leaky.ipynb"])
    assert len(found) == 2, found


# ------------------------------------------------------------------ (d) the stub guides the learner
# ------------------------------------------------------------------ (e) the released notebook
def grade_cells(nb) -> dict[str, tuple[str, float]]:
    return {c.metadata["nbgrader"]["grade_id"]: (c.cell_type, c.metadata["nbgrader"]["points"])
            for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")}


@pytest.mark.parametrize("released", RELEASED_NOTEBOOKS, ids=lambda p: p.parent.name)
def test_released_notebook_is_clean_and_keeps_its_grading(released):
    from nbgrader.nbgraderformat import MetadataValidator

    source = REPO_ROOT / "solutions" / "source" / released.parent.name / released.name
    assert source.is_file(), f"{released} has no source notebook"
    src_nb, rel_nb = nbformat.read(source, as_version=4), nbformat.read(released, as_version=4)
    MetadataValidator().validate_nb(src_nb)
    MetadataValidator().validate_nb(rel_nb)
    nbformat.validate(rel_nb)

    text = "\n".join(cell.source for cell in rel_nb.cells)
    assert not MARKER.search(text), "a solution, hidden-test or mark-scheme marker reached the release"
    assert grade_cells(rel_nb) == grade_cells(src_nb) and grade_cells(rel_nb), "grade cells or points changed"
    for cell in rel_nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"outputs left in cell {cell.id}"
            if meta.get("grade"):
                assert meta.get("locked") and cell.metadata.get("editable") is False, f"grade cell {cell.id} is not locked"
        if cell.cell_type == "markdown" and meta.get("solution"):
            edition = "en" if released.parts[-3] == "exercises" else released.parts[-3].removeprefix("exercises_")
            assert cell.source.strip() == ANSWER_PLACEHOLDER[edition]  # YOUR ANSWER HERE; 在此作答 in Chinese


def test_ch02_grades_written_answers_only():
    """Code points come from `course grade`; the notebook's graded cells are written answers (3 points)."""
    cells = grade_cells(nbformat.read(CH02_RELEASE, as_version=4))
    assert [kind for kind, _ in cells.values()] == ["markdown", "markdown"]
    assert sum(p for _, p in cells.values()) == 3


def test_release_refuses_an_auto_graded_cell(tmp_path):
    from course_admin.release.release import refuse_auto_graded
    from course_lib.provided.layout import Layout

    nb = nbformat.read(CH02_SOURCE, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("assert True", metadata={"nbgrader": {
        "grade": True, "solution": False, "locked": True, "grade_id": "test-planted", "points": 1,
        "schema_version": 3, "task": False}}))
    (tmp_path / "ch02_attention").mkdir()
    nbformat.write(nb, tmp_path / "ch02_attention" / "ch02_attention.ipynb")
    with pytest.raises(ReleaseError, match="test-planted"):
        refuse_auto_graded(Layout(tmp_path), tmp_path / "ch02_attention")
    refuse_auto_graded(Layout(REPO_ROOT), CH02_SOURCE.parent)  # the real one passes


# ------------------------------------------------------------------ the source notebook runs with the reference
def run_source_notebook(tmp_path: Path, attention_source: str, monkeypatch) -> dict[str, list]:
    from nbclient import NotebookClient

    shutil.copytree(REPO_ROOT / "course_lib", tmp_path / "course_lib", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO_ROOT / "tests", tmp_path / "tests", ignore=shutil.ignore_patterns("__pycache__", "test_*.py"))
    (tmp_path / "course_lib" / "attention.py").write_text(attention_source, encoding="utf-8")
    (tmp_path / "work").mkdir()
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the kernel imports this copy of course_lib
    nb = nbformat.read(CH02_SOURCE, as_version=4)
    NotebookClient(nb, timeout=60, allow_errors=True, resources={"metadata": {"path": str(tmp_path / "work")}}).execute()
    return {cell.id: [o for o in cell.outputs if o.output_type == "error"] for cell in nb.cells if cell.cell_type == "code"}


@pytest.mark.slow  # a kernel runs the notebook
def test_source_notebook_passes_with_the_reference(tmp_path, monkeypatch):
    reference = (REPO_ROOT / "solutions" / "course_ref" / "attention.py").read_text(encoding="utf-8")
    errors = run_source_notebook(tmp_path, reference, monkeypatch)
    assert {cell: [e.evalue for e in errs] for cell, errs in errors.items() if errs} == {}
    assert {"check", "workbook-heatmap"} <= set(errors)  # the self-check and the learner's own figure ran
