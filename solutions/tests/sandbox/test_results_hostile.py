"""What the grader reads back from a hostile class cannot take it down, leak a hidden case, or cost another
learner anything (issue 17, points 2, 4 and 5a).

Two graded batches of chapter 02 (planted_results.py), each with correct learners graded around the
attackers, run under a soft RLIMIT_AS with the peak memory of every process measured:

* a learner whose code writes DEFLATE-bomb result frames (members declaring 1000 MiB each) for every
  case, and one whose frames hold stride-0 views; the grader refuses both before comparing anything;
* three learners whose exceptions carry the hidden inputs behind every prefix the grader once let
  through; no hidden row or feedback file shows them, their public rows do;
* a notebook nested 200,000 levels deep beside a correct course_lib: full course_lib marks;
* a manifest listing 100 members of 20 MiB each: a warning row, nothing hashed by a run that skips it.

``--jobs 2`` grades them all, ``--jobs 1`` the bomb between two correct learners, then each again (a rerun
keeps every grade). The same without a sandbox, one piece at a time: test_results.py. About 1 min.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from course_admin.sandbox import procs
from course_lib.provided.layout import LAYOUT

from .. import planted as plant
from .. import planted_results as hostile

REPO = LAYOUT.root
pytestmark = [
    pytest.mark.skipif(not (REPO / "solutions" / "course_admin" / "grading" / "grade.py").is_file(),
                       reason="the grader ships only with the instructor's repository"),
    pytest.mark.grading,
]
SOFT_AS = 6 * 1024**3  # every process of the run: a bomb that got through fails here, not on the machine
PEAK_RSS = 1024**3  # no process of a run grows past this (about 360 MiB here; a loaded bomb frame is 2 GB)
MEASURED = ("import resource, subprocess, sys\n"
            f"resource.setrlimit(resource.RLIMIT_AS, ({SOFT_AS}, resource.RLIM_INFINITY))\n"
            "code = subprocess.run(sys.argv[1:]).returncode\n"
            "print(f'PEAK_RSS_KB {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}', file=sys.stderr)\n"
            "sys.exit(code)\n")
SCRATCH = "built from scratch"  # the ready-made case: read from the submitted source, nothing of the frames


def write_class(root: Path, jobs: int) -> list[Path]:
    attention = {"correct_a": plant.REFERENCE, "bomb": hostile.frame_writer("bomb_frame"),
                 "correct_b": plant.REFERENCE}
    if jobs > 1:
        attention.update(hostile.LEAKERS, stride0=hostile.frame_writer("stride0_frame"), deep_notebook=plant.REFERENCE)
    learners = {name: {"files": {"course_lib/__init__.py": "", "course_lib/attention.py": text}}
                for name, text in attention.items()}
    if "deep_notebook" in learners:
        learners["deep_notebook"]["files"]["ch02_attention.ipynb"] = hostile.DEEP_NOTEBOOK
    subs = plant.write(learners, root / "subs", zipped=("correct_a",))
    if jobs > 1:
        hostile.big_manifest_zip(subs / "big_manifest_ch02.zip")
    return [subs]


def grade(paths: list[Path], out: Path, jobs: int) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != procs.SWITCH}
    argv = [sys.executable, "-m", "course_lib.provided.cli", "grade", *map(str, paths), "--out", str(out),
            "--timeout", "60", "--memory", "1536", "--chapters", "ch02", "--jobs", str(jobs), "--trust-learners"]
    return subprocess.run([sys.executable, "-c", MEASURED, *argv], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=900)


def by_learner(out: Path) -> dict[str, list[dict]]:
    rows: dict[str, list[dict]] = {}
    for r in plant.read_csv(out / "grades.csv"):
        rows.setdefault(r["learner"], []).append(r)
    return rows


def lib(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["kind"] == "course_lib"]


def cases() -> list:
    """Chapter 02's graded cases, public then hidden, as the grader prepares them."""
    from course_admin.grading import plan

    return plan.prepare("02").cases


def full(rows: list[dict]) -> bool:
    return all(float(r["points"]) == float(r["max_points"]) for r in lib(rows)) and len(lib(rows)) == len(cases())


def peak_rss(proc: subprocess.CompletedProcess) -> int:
    line = next(ln for ln in proc.stderr.splitlines() if ln.startswith("PEAK_RSS_KB "))
    return int(line.split()[1]) * 1024


_BATCHES: dict[int, dict] = {}


def _batch(jobs: int, tmp_path_factory) -> dict:
    """The class graded with ``jobs`` workers, once per module."""
    if jobs not in _BATCHES:
        root = tmp_path_factory.mktemp(f"hostile_jobs{jobs}")
        paths = write_class(root, jobs)
        proc = grade(paths, root / "out", jobs)
        rows = by_learner(root / "out") if (root / "out" / "grades.csv").is_file() else {}
        _BATCHES[jobs] = {"proc": proc, "rows": rows, "out": root / "out", "paths": paths, "jobs": jobs}
    return _BATCHES[jobs]


@pytest.fixture(scope="module", params=[2, 1], ids=["jobs2", "jobs1"])
def batch(request, tmp_path_factory):
    """Each batch: correct learners graded around the bomb."""
    return _batch(request.param, tmp_path_factory)


@pytest.fixture(scope="module")
def class2(tmp_path_factory):
    """The --jobs 2 batch: every planted learner."""
    return _batch(2, tmp_path_factory)


def test_correct_learners_keep_full_marks_and_memory_stays_bounded(batch):
    proc, rows = batch["proc"], batch["rows"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for name in ("correct_a", "correct_b", *(("deep_notebook", "big_manifest") if batch["jobs"] > 1 else ())):
        assert full(rows[name]), [(r["component"], r["message"]) for r in lib(rows[name])]
    assert not [r for rs in rows.values() for r in rs if r["component"] == "(grader)"], "a grader failure row"
    assert peak_rss(proc) < PEAK_RSS, f"a process of the run reached {peak_rss(proc) >> 20} MiB"


def test_a_deflate_bomb_is_refused_and_says_why(batch):
    rows = lib(batch["rows"]["bomb"])
    assert len(rows) == len(cases()) and all(float(r["points"]) == 0 for r in rows)
    public = [r for r in rows if not r["component"].startswith("hidden case") and r["component"] != SCRATCH]
    assert all("refused: the result archive holds a compressed member" in r["message"] for r in public), public
    hidden = [r for r in rows if r["component"].startswith("hidden case")]
    assert all(r["message"].startswith("the result of this case was refused by the grader's checks") for r in hidden)


def test_a_stride0_frame_is_refused(class2):
    rows = [r for r in lib(class2["rows"]["stride0"]) if r["component"] != SCRATCH]
    assert all(float(r["points"]) == 0 for r in rows)
    assert all("strided view" in r["message"] for r in rows if not r["component"].startswith("hidden")), rows


def test_a_rerun_keeps_every_grade(batch):
    before = (batch["out"] / "grades.csv").read_bytes()
    proc = grade(batch["paths"], batch["out"], batch["jobs"])
    assert proc.returncode == 0 and f"{len(batch['rows'])} already graded, 0 to grade" in proc.stdout, proc.stdout
    assert (batch["out"] / "grades.csv").read_bytes() == before


# ---------------------------------------------------------------- point 4: hidden cases, end to end
def _hidden_secrets() -> list[str]:
    from course_admin.grading import plan

    chapter = plan.prepare("02")
    out = [hostile.MARKER]
    for g in chapter.cases:
        if g.hidden:
            q = chapter.inputs[g.index]["query"]
            out += [str(q.shape), str(list(q.shape)), "Shape_" + "_".join(map(str, q.shape)),
                    str(q.flatten()[:3].tolist())]
    return out


@pytest.mark.parametrize("learner", sorted(hostile.LEAKERS))
def test_no_hidden_row_shows_the_learners_text(class2, learner):
    rows = lib(class2["rows"][learner])
    secrets = _hidden_secrets()
    hidden = [r for r in rows if r["component"].startswith("hidden case")]
    assert len(hidden) == sum(g.hidden for g in cases()) > 0 and all(r["status"] == "fail" for r in hidden)
    leaked = [(r["component"], s) for r in hidden for s in secrets if s in r["message"]]
    assert not leaked, leaked
    assert all("(this hidden case checks: " in r["message"] for r in hidden), hidden
    public = [r for r in rows if not r["component"].startswith("hidden case") and r["component"] != SCRATCH]
    assert all(hostile.MARKER in r["message"] for r in public), public  # the learner's own text, on public cases
    feedback = (class2["out"] / "feedback" / f"{learner}.md").read_text(encoding="utf-8")
    for line in feedback.splitlines():
        if "hidden case" in line:
            assert not [s for s in secrets if s in line and s != hostile.MARKER], line


# ---------------------------------------------------------------- point 5a, and the manifest
def test_a_notebook_nested_too_deeply_fails_its_own_rows_only(class2):
    rows = class2["rows"]["deep_notebook"]
    assert full(rows)
    notebook = [r for r in rows if r["kind"] == "notebook"]
    assert notebook and all(r["status"] == "fail" and "nested too deeply" in r["message"] for r in notebook), notebook


def test_a_manifest_of_large_members_costs_a_bounded_read(class2):
    warnings = [r["message"] for r in class2["rows"]["big_manifest"] if r["kind"] == "submission"]
    assert any(f"lists {hostile.BIG_MEMBERS + 2} files: " in w and "were not checked" in w for w in warnings), warnings
