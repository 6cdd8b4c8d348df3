"""The class grader against a hostile class, part 2 (planted_holes.py): identity from what the instructor
collected, a disk filler and a fork bomb bounded, formula-safe CSV, a tampered grade table refused, and the
rlimits fallback refused unless trusted, then run as an unprivileged uid.

One bubblewrap batch (--jobs 2) grades the planted class; the other tests are short runs of their own.
Needs the instructor's solutions/ (skipped in a learner's checkout). About 1-2 min.
"""
from __future__ import annotations

import csv
import os
import shutil
import sqlite3
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from course_admin.intake.submissions import disk_name
from course_admin.sandbox import procs, reaper
from course_lib.provided.layout import LAYOUT

from .. import course_cli
from .. import planted as plant
from .. import planted_holes as holes

REPO = LAYOUT.root
pytestmark = [
    pytest.mark.skipif(not (REPO / "solutions" / "course_admin" / "grading" / "grade.py").is_file(),
                       reason="the grader ships only with the instructor's repository"),
    pytest.mark.grading,
]

BWRAP = procs.bwrap_works()[0] and os.environ.get(procs.SWITCH) != "rlimits"


def course(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != procs.SWITCH}
    return course_cli.run(list(args), cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)


GRADE_FLAGS = ("--timeout", "10", "--no-notebooks", "--memory", "1536", "--chapters", "ch02")


def grade(paths: list[Path], out: Path, *extra: str) -> subprocess.CompletedProcess:
    return course("grade", *map(str, paths), "--out", str(out), *GRADE_FLAGS, *extra)


def by_learner(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        key = r["learner"][1:] if r["learner"].startswith("'") else r["learner"]
        out.setdefault(key, []).append(r)
    return out


def lib(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["kind"] == "course_lib"]


def points(rows: list[dict]) -> list[float]:
    return [float(r["points"]) for r in lib(rows)]


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    if not BWRAP:
        pytest.skip("bubblewrap does not work here: the holes batch checks what it bounds")
    root = tmp_path_factory.mktemp("holes")
    paths, expect = holes.write_class(root)
    out = root / "out"
    proc = grade(paths, out, "--jobs", "2")
    rows = plant.read_csv(out / "grades.csv") if (out / "grades.csv").is_file() else []
    return {"proc": proc, "out": out, "rows": by_learner(rows), "expect": expect, "root": root}


def test_batch_grades_every_submission_once(batch):
    assert batch["proc"].returncode == 0, batch["proc"].stdout + batch["proc"].stderr
    assert set(batch["rows"]) == set(batch["expect"])


NOWHERE = "/nonexistent-holes"


@pytest.mark.parametrize("learner", sorted(holes.write_class(Path(NOWHERE), write=False)[1]))
def test_score(batch, learner):
    learner = learner.replace(NOWHERE, str(batch["root"]))  # collision keys name the path
    rows = batch["rows"][learner]
    what = batch["expect"][learner]
    full = [float(r["max_points"]) for r in lib(rows)]
    messages = [(r["component"], r["status"], r["message"]) for r in rows]
    isolations = {r["isolation"] for r in lib(rows)}  # "none": decided without running learner code
    assert isolations == {"none"} if what.get("collision") else "bwrap" in isolations <= {"bwrap", "none"}
    if what["score"] == "full":
        assert points(rows) == full, messages
    elif what["score"] == "no_scale":
        assert points(rows) == points(batch["rows"]["no_scale_ref"]) and sum(points(rows)) < sum(full), messages
    elif what["score"] == "zero":
        assert points(rows) == [0.0] * len(full), messages
    warnings = [r["message"] for r in rows if r["kind"] == "submission" and r["status"] == "warning"]
    if "warning" in what:
        assert len(warnings) == 1 and what["warning"] in warnings[0] and "graded as" in warnings[0], warnings
    else:
        assert not [w for w in warnings if "manifest.json names" in w], warnings


def test_impostor_is_graded_as_who_was_collected(batch):
    zoe, impostor = batch["rows"]["zoe"], batch["rows"]["aaa_impostor"]
    assert points(zoe) == [float(r["max_points"]) for r in lib(zoe)]
    assert all(r["status"] != "error" for r in zoe), "the real zoe must be graded, not reported as a duplicate"
    assert points(impostor) == points(batch["rows"]["no_scale_ref"])


def test_accents_are_two_learners_with_two_feedback_files(batch):
    folder = batch["out"] / "feedback"
    names = {disk_name("zoé"), disk_name("zoë")}
    assert len(names) == 2 and all(n.isascii() for n in names)
    for learner in ("zoé", "zoë"):
        text = (folder / f"{disk_name(learner)}.md").read_text(encoding="utf-8")
        assert text.startswith(f"# Feedback for {learner}\n")
    assert disk_name("zoe") == "zoe" and (folder / "zoe.md").is_file()


def test_one_name_twice_is_an_error_row_for_each(batch):
    keys = [k for k in batch["rows"] if k.startswith(holes.NFC_NAME)]
    assert len(keys) == 2
    for key in keys:
        rows = batch["rows"][key]
        assert all(r["status"] == "error" for r in rows)
        assert all("2 submissions are collected under the learner id 'renée'" in r["message"] for r in rows)
        assert unicodedata.is_normalized("NFC", key.split(" (collision")[0])


def test_csv_cells_cannot_be_formulas(batch):
    for name in ("grades.csv", "totals.csv"):
        text = (batch["out"] / name).read_text(encoding="utf-8")
        with open(batch["out"] / name, newline="", encoding="utf-8") as fh:
            cells = [c for row in csv.reader(fh) for c in row]
        assert not [c for c in cells if c[:1] in ("=", "+", "@", "\t", "\r") or (c[:1] == "-" and not _number(c))]
        assert "'=1+2" in text and "'@SUM(A1)" in text


def _number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def test_hidden_syntax_error_says_where(batch):
    rows = batch["rows"]["syntax_error"]
    hidden = [r for r in rows if r["component"].startswith("hidden case") and r["status"] != "pass"]
    assert hidden and all(r["message"].startswith("cannot import attention.py: SyntaxError at line ")
                          for r in hidden), hidden
    assert not [r for r in hidden if "invalid syntax" in r["message"]]


def test_nothing_written_outside_the_sandbox(batch):
    assert batch["proc"].returncode == 0
    assert not list(batch["root"].rglob("fill_*")), "the disk filler wrote outside the sandbox"


# ---------------------------------------------------------------- the grade table, checked on open
def test_tampered_gradebook_is_refused(tmp_path):
    subs = plant.write({"correct": {"files": {"course_lib/attention.py": plant.REFERENCE}}}, tmp_path / "subs")
    out = tmp_path / "out"
    out.mkdir()
    db = sqlite3.connect(out / "gradebook.sqlite")
    db.executescript("CREATE TABLE grades (learner TEXT); CREATE TRIGGER t AFTER INSERT ON grades "
                     "BEGIN DELETE FROM grades; END;")
    db.close()
    before = (out / "gradebook.sqlite").read_bytes()
    proc = grade([subs], out)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert str(out / "gradebook.sqlite") in proc.stderr and "trigger 't'" in proc.stderr
    assert "move it away" in proc.stderr
    assert (out / "gradebook.sqlite").read_bytes() == before and not (out / "grades.csv").exists()


# ---------------------------------------------------------------- the rlimits fallback
def test_rlimits_is_refused_without_trust(tmp_path):
    subs = plant.write({"correct": {"files": {"course_lib/attention.py": plant.REFERENCE}}}, tmp_path / "subs")
    proc = grade([subs], tmp_path / "out", "--isolation", "rlimits")
    assert proc.returncode == 2 and "rlimits was asked for (--isolation rlimits)" in proc.stderr
    assert "--trust-learners" in proc.stderr and "bubblewrap unavailable" not in proc.stderr
    assert not (tmp_path / "out").exists()
    proc = grade([subs], tmp_path / "out", "--isolation", "rlimits", "--trust-learners", "--require-sandbox")
    assert proc.returncode == 2 and "--require-sandbox" in proc.stderr and not (tmp_path / "out").exists()


def _python_runs_unprivileged() -> bool:
    """Whether Python and torch run as the rlimits fallback's uid here (not when pyenv lives under a /root
    of mode 700: then `course grade` refuses, test_rlimits_as_root_reads_no_secret)."""
    return procs.unprivileged()[0] is not None


def _grade_with_python_open(tmp_path: Path, paths: list[Path], out: Path, *extra: str) -> subprocess.CompletedProcess:
    """`grade`'s command in a mount namespace of its own where every folder on the way to Python and to this
    checkout is open to other uids (docker_like.opening, as test_run_bounds.py runs the fallback): what an
    instructor gets from the fix the refusal names (`chmod o+x /root`), without changing this machine."""
    from ..exports import docker_like

    scratch = tmp_path / "opened"
    scratch.mkdir(mode=0o755)
    argv = [sys.executable, "-m", "course_lib.provided.cli", "grade", *map(str, paths), "--out", str(out),
            *GRADE_FLAGS, *extra]
    env = {k: v for k, v in os.environ.items() if k != procs.SWITCH}
    return subprocess.run(docker_like.with_python_open(argv, [REPO], scratch), cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)


@pytest.mark.skipif(os.geteuid() != 0, reason="the unprivileged uid needs a root grader")
def test_rlimits_as_root_runs_learner_code_unprivileged(tmp_path):
    """Where Python cannot run as another uid (pyenv under a /root of mode 700, as on this project's machines),
    the grading runs where its folders are opened to other uids, so that the test runs everywhere."""
    from ..exports import docker_like

    opened = not _python_runs_unprivileged()
    if opened and not docker_like.unshare_works():
        pytest.skip(f"Python cannot run as another uid here: {procs.unprivileged()[1][:200]}")
    out, victim = tmp_path / "out", tmp_path / "victim"
    victim.mkdir()
    (victim / "notes.txt").write_text("keep me")
    targets = [out / "gradebook.sqlite", out / "planted.txt", victim / "notes.txt", REPO / "planted.txt"]
    learners = {"correct": {"files": {"course_lib/attention.py": plant.REFERENCE}},
                "bypass": {"files": {"course_lib/attention.py": holes.audit_bypass(targets)}}}
    subs = plant.write(learners, tmp_path / "subs")
    flags = ("--isolation", "rlimits", "--trust-learners", "--jobs", "2")
    proc = _grade_with_python_open(tmp_path, [subs], out, *flags) if opened else grade([subs], out, *flags)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "NOT SANDBOXED: rlimits was asked for" in proc.stderr and "uid" in proc.stderr
    rows = by_learner(plant.read_csv(out / "grades.csv"))
    for learner in learners:
        assert "rlimits" in {r["isolation"] for r in lib(rows[learner])} <= {"rlimits", "none"}
        assert points(rows[learner]) == [float(r["max_points"]) for r in lib(rows[learner])], rows[learner]
    assert (victim / "notes.txt").read_text() == "keep me"
    assert not (out / "planted.txt").exists() and not (REPO / "planted.txt").exists()
    db = sqlite3.connect(out / "gradebook.sqlite")
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="the unprivileged uid needs a root grader")
def test_rlimits_as_root_reads_no_secret(tmp_path):
    """Issue 17: the fallback's uid kept CAP_DAC_READ_SEARCH when the interpreter lived under /root, so
    learner code read solutions/ and --out/.prepared. It now keeps no capability: it reads neither (the
    solutions only where every user may read them, which the banner says), or the run refuses, naming the fix."""
    from course_admin.grading import plan

    out = tmp_path / "out"
    prepared = out / ".prepared"
    secrets = {"prepared": [str(prepared / "*.pt"), str(prepared / f"ch02-{plan.chapter_fingerprint('02')}.pt")],
               "solutions": [str(REPO / "solutions" / "hidden" / "ch02.py"),
                             str(REPO / "solutions" / "course_ref" / "attention.py")]}
    learners = {"correct": {"files": {"course_lib/attention.py": plant.REFERENCE}},
                "reader": {"files": {"course_lib/attention.py": holes.secret_reader(secrets)}}}
    subs = plant.write(learners, tmp_path / "subs")
    proc = grade([subs], out, "--isolation", "rlimits", "--trust-learners")
    if not _python_runs_unprivileged():
        closed = procs.closed_to_others(Path(sys.executable))
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert f"{closed} (mode" in proc.stderr and f"chmod o+x {closed}" in proc.stderr, proc.stderr
        assert "apt-get install bubblewrap" in proc.stderr and "Nothing graded" in proc.stderr
        assert not (out / "grades.csv").exists()
        return
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = by_learner(plant.read_csv(out / "grades.csv"))
    assert points(rows["correct"]) == [float(r["max_points"]) for r in lib(rows["correct"])]
    said = " ".join(r["message"] for r in lib(rows["reader"]))
    assert "READ prepared" not in said, said
    world = procs.readable_by_others(REPO / "solutions" / "hidden" / "ch02.py")
    assert ("solutions" in said) == world, said
    if world:
        assert f"{REPO / 'solutions'} (the reference and the hidden cases) is readable by other users" in proc.stderr
    else:
        assert points(rows["reader"]) == [float(r["max_points"]) for r in lib(rows["reader"])], said


def test_stale_scratch_folders_are_swept(tmp_path):
    import tempfile
    dead = subprocess.Popen(["true"])
    dead.wait()
    gone = Path(tempfile.mkdtemp(prefix=f"{reaper.Cgroup.PREFIX}{dead.pid}_"))
    live = Path(tempfile.mkdtemp(prefix=f"{reaper.Cgroup.PREFIX}{os.getpid()}_"))
    try:
        reaper.sweep_stale()
        assert not gone.exists() and live.exists()
    finally:
        shutil.rmtree(gone, ignore_errors=True)
        shutil.rmtree(live, ignore_errors=True)
