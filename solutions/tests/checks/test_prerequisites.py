"""Chapters that build on chapters: a fixture chapter 03 that calls chapter 02's attention.

A copy of the repository gets one new chapter, added the way a contributor adds one (a spec with
``REQUIRES = ["02"]``, a reference module, hidden cases), found by its number alone: `course release`
makes its stub, `course refs` its reference outputs, `course check ch03` and `course grade` run it with
the learner's chapter 02 underneath. Planted learners: correct 03 over a correct 02, over a wrong 02,
and without 02's file, graded under both --prereqs policies.

Commands run in the copy with PYTHONPATH naming the copy's own packages (course_lib at its root,
course_ref and course_admin under its solutions/): a copy of the repository is a repository.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course_lib.provided.layout import LAYOUT, REPO_ROOT, chapter_facts, prerequisites

from .. import course_cli

pytestmark = [pytest.mark.grading]

REFERENCE_02 = (REPO_ROOT / "solutions" / "course_ref" / "attention.py").read_text(encoding="utf-8")
SCALE = next(line.split("#")[0].strip() for line in REFERENCE_02.splitlines() if "/ math.sqrt(" in line)
WRONG_02 = REFERENCE_02.replace(SCALE, SCALE.replace(" / math.sqrt(d_k)", ""))  # the √d_k scale left out

SPEC_03 = '''"""Fixture chapter 03 (tests only): self-attention applied twice, on chapter 02's attention."""
from __future__ import annotations

import torch

from course_lib.provided.checking import Case

TITLE = "Attention twice (fixture)"
MODULES = ["twice.py"]
REQUIRES = ["02"]


def make(seed: int, lead: tuple[int, ...] = (2,), seq: int = 4, d: int = 8) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(*lead, seq, d, generator=g)}


def forward(impl, inputs: dict) -> dict:
    return {"output": impl.twice.attend_twice(inputs["x"])}


PROBES = {"forward": forward}
CASES = [
    Case("attention twice", 2.0, "forward", lambda s: make(s), seed=301),
    Case("attention twice with heads", 1.0, "forward", lambda s: make(s, lead=(2, 3), d=16), seed=302),
]
MISTAKES: dict[str, str] = {}
'''
HIDDEN_03 = '''from course_lib.provided.chapters import load_spec
from course_lib.provided.checking import Case

_spec = load_spec("03")
CASES = [Case("h-twice-long", 1.0, "forward", lambda s: _spec.make(s, lead=(3,), seq=9, d=12), seed=9391)]
'''
REFERENCE_03 = '''"""Fixture chapter 03: self-attention applied twice."""
from __future__ import annotations

from torch import Tensor

from .attention import scaled_dot_product_attention


def attend_twice(x: Tensor) -> Tensor:
    """(..., seq, d) -> (..., seq, d): the self-attention of the self-attention of x."""
    ### BEGIN SOLUTION
    once, _ = scaled_dot_product_attention(x, x, x)  # (..., seq, d)
    twice, _ = scaled_dot_product_attention(once, once, once)  # (..., seq, d)
    return twice
    ### END SOLUTION
'''
FULL_03 = [2.0, 1.0, 1.0]  # two public cases, one hidden
ALONE_03 = "def attend_twice(x):\n    return 2 * x\n"  # wrong, and uses no chapter 02 at all


def real_chapter_files(number: str) -> tuple[str, ...]:
    """Path prefixes of the course's own chapter ``number``, in every part (found by its number)."""
    facts = chapter_facts(number)
    return (f"tests/specs/ch{number}.py", f"tests/reference/ch{number}.pt", f"tests/test_ch{number}_",
            f"solutions/hidden/ch{number}.py", f"solutions/mistakes/ch{number}", f"solutions/source/ch{number}_",
            f"exercises/ch{number}_", f"book/{number}_", f"solutions/tests/test_ch{number}_",
            *(f"solutions/course_ref/{m}" for m in facts.modules), *(f"course_lib/{m}" for m in facts.modules))


# The course's own chapter 03 (multi-head attention) is left out of the copy: the fixture replaces it.
# So is every chapter built on it, directly or not (05 on 03, 06 on 05, ...): they need the real one.
LEFT_OUT = tuple(p for n in LAYOUT.chapters() if n == "03" or "03" in prerequisites(n) for p in real_chapter_files(n))


def tracked(root: Path) -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                            capture_output=True, check=True).stdout.decode().split("\0")
    return [p for p in listed if p and (root / p).is_file()]


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fixture") / "repo"
    for rel in tracked(REPO_ROOT):
        if rel.startswith(LEFT_OUT):
            continue  # the fixture chapter 03 takes the place of the course's own and what builds on it
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / rel, root / rel)
    (root / "tests" / "specs" / "ch03.py").write_text(SPEC_03)
    (root / "solutions" / "hidden" / "ch03.py").write_text(HIDDEN_03)
    (root / "solutions" / "course_ref" / "twice.py").write_text(REFERENCE_03)
    for step in (["release"], ["refs", "ch03"]):
        proc = course(root, *step)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return root


def course(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "solutions")])}
    return course_cli.run(list(args), cwd=root, env=env,
                          capture_output=True, text=True, timeout=900)


def learner(root: Path, name: str, files: dict[str, str]) -> Path:
    folder = root / name
    for rel, text in files.items():
        (folder / "course_lib" / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / "course_lib" / rel).write_text(text)
    (folder / "manifest.json").write_text(json.dumps({"learner": name, "chapter": "03"}))
    return folder


@pytest.fixture(scope="module")
def graded(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, list[dict]]]:
    subs = tmp_path_factory.mktemp("subs")
    learner(subs, "good", {"attention.py": REFERENCE_02, "twice.py": REFERENCE_03})
    learner(subs, "bad02", {"attention.py": WRONG_02, "twice.py": REFERENCE_03})
    learner(subs, "no02", {"twice.py": REFERENCE_03})
    learner(subs, "alone", {"attention.py": WRONG_02, "twice.py": ALONE_03})
    out: dict[str, dict[str, list[dict]]] = {}
    for policy in ("learner", "reference"):
        dest = subs.parent / f"out_{policy}"
        proc = course(repo, "grade", str(subs), "--out", str(dest), "--chapters", "ch03", "--no-notebooks",
                      "--prereqs", policy, "--timeout", "60", "--quiet")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        with open(dest / "grades.csv", newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        out[policy] = {}
        for r in rows:
            out[policy].setdefault(r["learner"], []).append(r)
    return out


def points(rows: list[dict]) -> list[float]:
    return [float(r["points"]) for r in rows if r["kind"] == "course_lib"]


def test_new_chapter_is_found_by_its_number(repo: Path) -> None:
    stub = (repo / "course_lib" / "twice.py").read_text()
    assert "Chapter 03: implement attend_twice in course_lib/twice.py (book chapter 03)" in stub
    assert (repo / "tests" / "reference" / "ch03.pt").is_file()
    listing = course(repo, "check", "3")
    assert "Chapter 03 — Attention twice (fixture)" in listing.stdout, listing.stdout + listing.stderr


def test_correct_chapter_03_scores_full_marks(graded) -> None:
    for policy in ("learner", "reference"):
        rows = graded[policy]["good"]
        assert {r["chapter"] for r in rows} == {"03"}, "only the chapter asked for is in the table"
        assert points(rows) == FULL_03, (policy, rows)


def test_wrong_chapter_02_is_named_under_the_learner_policy(graded) -> None:
    rows = graded["learner"]["bad02"]
    assert points(rows) == [0.0, 0.0, 0.0], rows
    for r in rows:
        assert r["message"].startswith("Chapter 03 uses your chapter 02 (attention.py), which fails"), r
        assert "fix those first" in r["message"]
    assert points(graded["reference"]["bad02"]) == FULL_03, "the reference policy runs the reference's 02"


def test_a_failing_chapter_02_that_chapter_03_does_not_import_is_not_named(graded) -> None:
    """The note is a diagnosis: it names chapter 02 only when the learner's chapter 03 imports it."""
    rows = graded["learner"]["alone"]
    assert points(rows) == [0.0, 0.0, 0.0], rows
    assert not any("chapter 02" in r["message"] for r in rows), rows


def test_missing_chapter_02_file(graded) -> None:
    rows = graded["learner"]["no02"]
    assert points(rows) == [0.0, 0.0, 0.0]
    assert {r["status"] for r in rows} == {"missing"}
    assert "course_lib/attention.py (chapter 02, which chapter 03 builds on) is missing" in rows[0]["message"]
    assert points(graded["reference"]["no02"]) == FULL_03


def test_course_check_and_submit_take_the_union(repo: Path, tmp_path: Path) -> None:
    (repo / "course_lib" / "twice.py").write_text(REFERENCE_03)
    (repo / "course_lib" / "attention.py").write_text(WRONG_02)
    check = course(repo, "check", "ch03")
    assert check.returncode == 1 and "Chapter 03 uses your chapter 02 (attention.py), which fails" in check.stdout
    report = json.loads(course(repo, "check", "ch03", "--json").stdout)
    assert report["prerequisites_failing"]["02"]["failed"] > 0
    assert all(r["message"].startswith("Chapter 03 uses your chapter 02") for r in report["results"])
    (repo / "course_lib" / "twice.py").write_text(ALONE_03)
    check = course(repo, "check", "ch03")
    assert check.returncode == 1 and "chapter 02" not in check.stdout, check.stdout  # not imported: not named
    (repo / "course_lib" / "twice.py").write_text(REFERENCE_03)
    (repo / "course_lib" / "attention.py").write_text(REFERENCE_02)
    check = course(repo, "check", "ch03")
    assert check.returncode == 0 and "3 / 3" in check.stdout, check.stdout
    (repo / "course_lib" / "attention.py").unlink()
    sub = course(repo, "submit", "ch03", "--no-notebook", "--learner", "pat", "--out", str(tmp_path))
    assert sub.returncode == 2 and "course_lib/attention.py is missing: chapter 03 runs it" in sub.stderr


def test_public_pytest_names_the_failing_prerequisite(repo: Path) -> None:
    (repo / "course_lib" / "twice.py").write_text(REFERENCE_03)
    (repo / "course_lib" / "attention.py").write_text(WRONG_02)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), str(repo / "solutions")])}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--impl", "learner",
                           "tests/test_public.py", "-k", "ch03"], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Chapter 03 uses your chapter 02 (attention.py), which fails" in proc.stdout
