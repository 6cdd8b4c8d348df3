"""The synthetic nbgrader chapter and the helpers behind test_notebook_grading.py.

A small nbgrader source notebook is generated with nbformat (two graded test cells, a test that warns,
a written answer), so the notebook grader's tests do not depend on the chapter notebooks.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from course_admin import procs
from course_admin.notebooks import CellGrade, NotebookGrade, grade_notebook
from course_lib.provided.layout import LAYOUT

REPO = LAYOUT.root

HIDDEN_MARK = "HIDDEN_SENTINEL_9f3c"
LOOP_MARK = "LOOP_SENTINEL_5e1a"

# ------------------------------------------------------------------------------ the synthetic chapter
IMPORT = "import torch\nfrom course_lib.attention import scaled_dot_product_attention\n"

TEST_SUMS = (
    IMPORT
    + "q = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(0))\n"
    "out, w = scaled_dot_product_attention(q, q, q)\n"
    "assert torch.allclose(w.sum(-1), torch.ones(2, 3)), 'each row of weights should sum to 1'\n"
    "### BEGIN HIDDEN TESTS\n"
    f"hidden_rows_ok = w.shape == (2, 3, 3)  # {HIDDEN_MARK} rows\n"
    "assert hidden_rows_ok, 'weights have the wrong shape'\n"
    "### END HIDDEN TESTS\n"
)
TEST_SCALE = (
    IMPORT
    + "import math\n"
    "g = torch.Generator().manual_seed(1)\n"
    "q, k, v = (torch.randn(2, 5, 16, generator=g) for _ in range(3))\n"
    "out, w = scaled_dot_product_attention(q, k, v)\n"
    "expected = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(16), dim=-1)\n"
    "assert torch.allclose(w, expected, atol=1e-5), 'weights differ: did you scale the scores by 1/sqrt(d_k)?'\n"
    "### BEGIN HIDDEN TESTS\n"
    f"secret_check_{HIDDEN_MARK} = torch.allclose(out, expected @ v, atol=1e-5)\n"
    f"assert secret_check_{HIDDEN_MARK}, 'the output is not weights @ value'\n"
    "### END HIDDEN TESTS\n"
)
TEST_WARNS = (
    "import warnings, sys\n"
    "warnings.warn('a harmless deprecation warning')\n"
    "print('also on stderr', file=sys.stderr)\n"
    + IMPORT
    + "assert scaled_dot_product_attention(torch.ones(1, 1, 2), torch.ones(1, 1, 2), torch.ones(1, 1, 2))[1].item() == 1.0\n"
)


def _cell(cell, grade_id: str, *, grade=False, solution=False, locked=False, points=0):
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution}
    if grade:
        meta["points"] = points
    cell.metadata["nbgrader"] = meta
    return cell


def make_source(folder: Path) -> Path:
    """An nbgrader source notebook: intro, a learner code cell, three graded tests, a written answer."""
    nb = new_notebook(cells=[
        _cell(new_markdown_cell("# Chapter 02 (synthetic)\nImplement attention in course_lib/attention.py."),
              "intro", locked=True),
        _cell(new_code_cell("# your scratch work\n### BEGIN SOLUTION\nx = 1\n### END SOLUTION"),
              "scratch", solution=True),
        _cell(new_code_cell(TEST_SUMS), "test_rows_sum_to_one", grade=True, locked=True, points=2),
        _cell(new_code_cell(TEST_SCALE), "test_scaled", grade=True, locked=True, points=3),
        _cell(new_code_cell(TEST_WARNS), "test_warning_is_fine", grade=True, locked=True, points=1),
        _cell(new_markdown_cell("Why scale the scores by sqrt(d_k)? Answer in two sentences."),
              "why_scale_q", locked=True),
        _cell(new_markdown_cell("YOUR ANSWER HERE"), "why_scale", grade=True, solution=True, points=2),
    ])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    src = folder / "source" / "ch02_synthetic" / "ch02_synthetic.ipynb"
    src.parent.mkdir(parents=True)
    nbformat.write(nb, src)
    return src


def release_of(source: Path) -> nbformat.NotebookNode:
    """What learners receive: solutions and hidden tests stripped (a simple stand-in for generate_assignment)."""
    nb = nbformat.read(source, as_version=4)
    for cell in nb.cells:
        lines, skip = [], False
        for line in cell.source.splitlines():
            if "BEGIN SOLUTION" in line or "BEGIN HIDDEN TESTS" in line or "BEGIN MARK SCHEME" in line:
                skip = True
                if "BEGIN SOLUTION" in line:
                    lines.append("# YOUR CODE HERE")
                continue
            if "END SOLUTION" in line or "END HIDDEN TESTS" in line or "END MARK SCHEME" in line:
                skip = False
                continue
            if not skip:
                lines.append(line)
        cell.source = "\n".join(lines)
    return nb


# The correct implementation is read from the reference, never copied: learners receive tests/, and
# solutions/tests/test_release.py checks that no solution line appears outside solutions/.
CORRECT = (LAYOUT.reference / "attention.py").read_text(encoding="utf-8")
assert " / math.sqrt(d_k)" in CORRECT and "    return output, weights\n" in CORRECT
UNSCALED = CORRECT.replace(" / math.sqrt(d_k)", "")


def make_snapshot(folder: Path, attention: str | None) -> Path:
    snap = folder / "snapshot"
    snap.mkdir()
    if attention is not None:
        (snap / "course_lib").mkdir()
        (snap / "course_lib" / "__init__.py").write_text("")
        (snap / "course_lib" / "attention.py").write_text(attention)
    return snap


# ------------------------------------------------------------------------------------------ helpers
def grade(tmp_path: Path, chapter, nb, attention: str | None = CORRECT, *, raw: str | None = None,
          **kw) -> NotebookGrade:
    source, _ = chapter
    path = tmp_path / "submitted.ipynb"
    if raw is not None:
        path.write_text(raw)
    else:
        nbformat.write(nb, path)
    snap = make_snapshot(tmp_path, attention)
    started = time.monotonic()
    result = grade_notebook(path, snap, "02", tmp_path / "work", source_notebook=source, **kw)
    seconds = time.monotonic() - started
    print(f"\nautograde took {seconds:.1f} s ({result.isolation}): "
          + ", ".join(f"{c.name}={c.points:g}/{c.max_points:g} {c.status}" for c in result.cells))
    assert isinstance(result, NotebookGrade)
    assert result.isolation == expected_isolation()
    return result


def scores(result: NotebookGrade) -> dict[str, float]:
    return {c.name: c.points for c in result.cells}


def by_name(result: NotebookGrade) -> dict[str, CellGrade]:
    return {c.name: c for c in result.cells}


def learner_copy(chapter, answer: str = "Because the variance of q.k grows with d_k.") -> nbformat.NotebookNode:
    nb = nbformat.from_dict(json.loads(json.dumps(chapter[1])))
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "why_scale":
            cell.source = answer
    return nb


def no_leftovers(tmp_path: Path) -> list[str]:
    """Processes whose command line mentions this test's folder (kernels, workers, learner children)."""
    left = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if str(tmp_path) in cmd and stat[stat.rindex(")") + 2] != "Z":
                left.append(f"{entry}: {cmd[:200]}")
    return left


def expected_isolation() -> str:
    """What the kernel should run under: bwrap wherever it works, unless switched off."""
    if os.environ.get("COURSE_GRADE_ISOLATION") == "rlimits":
        return "rlimits"
    if Path("/usr/bin/bwrap").exists():
        assert procs.bwrap_works()[0], "bubblewrap is installed but does not work"
    return "bwrap" if procs.bwrap_works()[0] else "rlimits"


FULL = {"test_rows_sum_to_one": 2, "test_scaled": 3, "test_warning_is_fine": 1, "why_scale": 0}
