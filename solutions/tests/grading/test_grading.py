"""The class grader against planted submissions (issue 3): scores, isolation, resumability, determinism.

One batch grades every planted learner (solutions/tests/planted.py) with --jobs 2 and short time limits; the tests
then read its table. Needs the instructor's solutions/ (skipped in a learner's checkout). About 2-3 min.
"""
from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from course_lib.provided.layout import LAYOUT

from .. import course_cli
from .. import planted as plant
from ..strays import wait_no_strays

REPO = LAYOUT.root
pytestmark = [
    pytest.mark.skipif(not (REPO / "solutions" / "course_admin" / "grading" / "grade.py").is_file(),
                       reason="the grader ships only with the instructor's repository"),
    pytest.mark.grading,
]
TIMEOUT = 10
SUBSET = ["correct", "wrong_values", "nan", "syntax_error", "exit_in_call", "inplace"]
SCRATCH = "built from scratch"  # the ready-made case: read from the source in the grader's process, nothing runs


def course(*args: str, **kw) -> subprocess.CompletedProcess:
    return course_cli.run(list(args), cwd=REPO,
                          capture_output=True, text=True, timeout=600, **kw)


def grade_args(subs: list[Path] | Path, out: Path, jobs: int = 2) -> list[str]:
    paths = [str(p) for p in (subs if isinstance(subs, list) else [subs])]
    # --trust-learners: lets the batch run where COURSE_GRADE_ISOLATION=rlimits or bubblewrap is missing
    # (test_isolation_recorded still insists on bubblewrap wherever it is installed)
    return ["grade", *paths, "--out", str(out), "--jobs", str(jobs), "--timeout", str(TIMEOUT),
            "--no-notebooks", "--memory", "1536", "--trust-learners", "--chapters", "ch02"]


def vectors(rows: list[dict]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for r in rows:
        if r["kind"] == "course_lib":
            out.setdefault(r["learner"], []).append(float(r["points"]))
    return out


class Listener:
    """A TCP listener on 127.0.0.1 that records whether anything connected."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(5)
        self.sock.settimeout(0.5)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
                self.connections += 1
                conn.close()
            except OSError:
                pass

    def close(self) -> None:
        self.stop = True
        self.thread.join(2)
        self.sock.close()


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    root = tmp_path_factory.mktemp("grading")
    subs, out = root / "submissions", root / "out"
    listener = Listener()
    learners = plant.planted(listener.port, out / "gradebook.sqlite", subs / "victim")
    plant.write(learners, subs, zipped=("correct", "wrong_values", "huge_output"))
    (subs / "badzip_ch02.zip").write_bytes(b"this is not a zip file")
    (subs / "badmanifest" / "course_lib").mkdir(parents=True)
    (subs / "badmanifest" / "course_lib" / "attention.py").write_text(plant.REFERENCE)
    (subs / "badmanifest" / "manifest.json").write_text("{not json")
    missing = root / "nobody_ch02.zip"
    started = time.monotonic()
    proc = course(*grade_args([subs, missing], out))
    elapsed = time.monotonic() - started
    listener.close()
    rows = plant.read_csv(out / "grades.csv")
    yield {"proc": proc, "out": out, "subs": subs, "rows": rows, "learners": learners,
           "connections": listener.connections, "elapsed": elapsed, "root": root}


def test_batch_finishes(batch):
    assert batch["proc"].returncode == 0, batch["proc"].stdout + batch["proc"].stderr
    graded = {r["learner"] for r in batch["rows"]}
    assert set(batch["learners"]) | {"badzip", "badmanifest", "nobody"} == graded


@pytest.mark.parametrize("learner", list(plant.planted(0, Path("/x"), Path("/y"))))
def test_score_vector(batch, learner):
    got = vectors(batch["rows"])[learner]
    expected = batch["learners"][learner]["expected"]
    isolation = {r["isolation"] for r in batch["rows"] if r["learner"] == "correct"}
    if isolation == {"rlimits"} and learner in ("left_running", "tamper"):
        # Without bubblewrap the fallback's audit hook refuses subprocesses and writes outside the box
        # as soon as the module is imported, so these learners lose every case instead of none.
        expected = [0.0] * len(expected)
    messages = [(r["component"], r["status"], r["message"]) for r in batch["rows"] if r["learner"] == learner]
    assert got == expected, messages
    if "status" in batch["learners"][learner]:
        assert {m[1] for m in messages} == {batch["learners"][learner]["status"]}


def test_isolation_recorded(batch):
    isolations = {r["isolation"] for r in batch["rows"] if r["learner"] == "correct" and r["component"] != SCRATCH}
    assert len(isolations) == 1 and isolations <= {"bwrap", "rlimits"}
    if Path("/usr/bin/bwrap").exists() and os.environ.get("COURSE_GRADE_ISOLATION") != "rlimits":
        assert isolations == {"bwrap"}, "bubblewrap is installed but did not run"


def test_bad_inputs_are_error_rows(batch):
    by = {}
    for r in batch["rows"]:
        by.setdefault(r["learner"], []).append(r)
    assert all(r["status"] == "error" and "unreadable zip" in r["message"] for r in by["badzip"])
    assert all(r["status"] == "error" and "manifest" in r["message"] for r in by["badmanifest"])
    assert all(r["status"] == "error" and "no such file" in r["message"] for r in by["nobody"])


def test_messages_name_the_failure(batch):
    msg = {(r["learner"], r["component"]): r["message"] for r in batch["rows"]}
    assert "SyntaxError" in msg[("syntax_error", "values, no mask")]
    assert "ModuleNotFoundError" in msg[("import_error", "values, no mask")]
    assert "sys.exit" in msg[("exit_at_import", "values, no mask")]
    assert "time limit" in msg[("infinite_loop", "values, no mask")]
    assert "shape" in msg[("wrong_shape", "values, no mask")]
    assert "NaN" in msg[("nan", "fully masked row stays finite")] or "-inf" in msg[("nan", "fully masked row stays finite")]
    assert "ended during this case" in msg[("exit_in_call", "float64 in, float64 out")]
    assert "missing from the submission" in msg[("no_course_lib", "values, no mask")]
    assert "allocate" in msg[("memory_bomb", "values, no mask")].lower() or "memory" in msg[("memory_bomb", "values, no mask")].lower()


def test_ready_made_attention_loses_only_built_from_scratch(batch):
    """The fused learner's values are right; the parent's scan of its submitted file finds F.scaled_dot_product_attention."""
    rows = {r["component"]: r for r in batch["rows"] if r["learner"] == "fused" and r["kind"] == "course_lib"}
    scratch = rows[SCRATCH]
    assert scratch["status"] == "fail" and scratch["isolation"] == "none", scratch
    assert "ready-made torch.nn.functional.scaled_dot_product_attention (line " in scratch["message"], scratch
    assert all(r["status"] == "pass" for name, r in rows.items() if name != SCRATCH)
    assert {r["status"] for r in batch["rows"] if r["learner"] == "correct" and r["component"] == SCRATCH} == {"pass"}
    text = (batch["out"] / "feedback" / "fused.md").read_text(encoding="utf-8")
    assert "must be built from scratch" in text


def test_known_mistakes_named_in_feedback(batch):
    for learner, info in batch["learners"].items():
        text = (batch["out"] / "feedback" / f"{learner}.md").read_text(encoding="utf-8")
        for phrase in info.get("mistakes", []):
            assert phrase in text, (learner, phrase)
        assert "Known mistakes recognised" in text or not info.get("mistakes")


def test_hidden_cases_do_not_leak(batch):
    hidden_src = (REPO / "solutions" / "hidden" / "ch02.py").read_text()
    for path in (batch["out"] / "feedback").glob("*.md"):
        text = path.read_text(encoding="utf-8")
        for secret in ("h-plain-long", "h-heads-wide", "h-padding", "h-causal", "9301", "9305", "seq_q=9",
                       "hidden/ch02", "solutions/"):
            assert secret not in text, (path.name, secret)
        assert hidden_src[:200] not in text
    for r in batch["rows"]:
        if r["component"].startswith("hidden case") and r["status"] != "pass":
            assert "index" not in r["message"] and "expected" not in r["message"].split("(")[0], r
            assert "got " not in r["message"], r
    text = (batch["out"] / "feedback" / "wrong_values.md").read_text()
    assert "hidden case 3" in text


def test_nothing_left_running(batch):
    assert wait_no_strays() == []
    from course_admin.sandbox.reaper import _owner_gone  # a cgroup of a grading still running (another test's) is not left over
    leftover = [p for c in ("pids", "memory") for p in Path(f"/sys/fs/cgroup/{c}").glob("course_grade_*")
                if _owner_gone(p.name)]
    assert leftover == []


def test_no_network(batch):
    assert batch["connections"] == 0


def test_gradebook_and_other_learners_untouched(batch):
    db = sqlite3.connect(batch["out"] / "gradebook.sqlite")
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert (batch["subs"] / "victim" / "course_lib" / "attention.py").is_file()
    v = vectors(batch["rows"])
    assert v["victim"] == v["correct"] == plant.FULL


def test_speed_note(batch):
    n = len(batch["learners"]) + 3
    print(f"\nplanted batch: {n} learners in {batch['elapsed']:.1f} s with --jobs 2")


def _subset(batch, root: Path) -> Path:
    learners = {k: batch["learners"][k] for k in SUBSET}
    return plant.write(learners, root)


@pytest.mark.slow
def test_determinism_and_independence_of_jobs(batch, tmp_path):
    subs = _subset(batch, tmp_path / "subs")
    proc = course(*grade_args(subs, tmp_path / "out", jobs=1))
    assert proc.returncode == 0, proc.stderr
    rows = plant.read_csv(tmp_path / "out" / "grades.csv")
    same_in_batch = [r for r in batch["rows"] if r["learner"] in SUBSET]
    assert rows == same_in_batch  # same rows, same order, whatever --jobs and the other learners
    (tmp_path / "first.csv").write_bytes((tmp_path / "out" / "grades.csv").read_bytes())
    # the cold way (a new sandbox per run, not the warm fork server): the same grades
    proc = course(*grade_args(subs, tmp_path / "out2", jobs=2), env={**os.environ, "COURSE_GRADE_WARM": "0"})
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out2" / "grades.csv").read_bytes() == (tmp_path / "first.csv").read_bytes()
    # graded again from the chapters prepared by the first run (its store), not computed again: same grades
    assert len(list((tmp_path / "out" / ".prepared").glob("ch02-*.pt"))) == 1
    proc = course(*grade_args(subs, tmp_path / "out", jobs=2), "--regrade")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out" / "grades.csv").read_bytes() == (tmp_path / "first.csv").read_bytes()


@pytest.mark.slow
def test_kill_and_resume(batch, tmp_path):
    subs = _subset(batch, tmp_path / "subs")
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "course_lib.provided.cli", *grade_args(subs, out, jobs=1)]
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    db_path = out / "gradebook.sqlite"
    finished: dict[str, str] = {}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if db_path.exists():
            try:
                db = sqlite3.connect(db_path, timeout=1)
                finished = dict(db.execute("SELECT learner, run_id FROM learners"))
                db.close()
            except sqlite3.Error:
                finished = {}
            if len(finished) >= 2:
                break
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert 2 <= len(finished) < len(SUBSET), "the batch was not caught midway"
    db = sqlite3.connect(db_path)
    before = dict(db.execute("SELECT learner, run_id FROM learners"))
    db.close()
    resumed = course(*grade_args(subs, out, jobs=2))
    assert resumed.returncode == 0, resumed.stderr
    assert f"{len(before)} already graded" in resumed.stdout
    db = sqlite3.connect(db_path)
    after = dict(db.execute("SELECT learner, run_id FROM learners"))
    db.close()
    assert set(after) == set(SUBSET)
    for learner, run_id in before.items():
        assert after[learner] == run_id, f"{learner} was graded again"
    uninterrupted = [r for r in batch["rows"] if r["learner"] in SUBSET]
    assert plant.read_csv(out / "grades.csv") == uninterrupted
    assert wait_no_strays() == []
    # a changed submission is graded again; the others are not
    (subs / "wrong_values" / "course_lib" / "attention.py").write_text(plant.REFERENCE)
    again = course(*grade_args(subs, out, jobs=1))
    assert f"{len(SUBSET) - 1} already graded, 1 to grade" in again.stdout
    assert vectors(plant.read_csv(out / "grades.csv"))["wrong_values"] == plant.FULL


def test_submit_then_grade(tmp_path):
    """`course submit` output is what `course grade` reads; a tampered file shows as a warning."""
    proc = course("submit", "ch02", "--out", str(tmp_path), "--format", "both", "--no-notebook",
                  env={**os.environ, "COURSE_LEARNER": "sam"})  # an id from the environment is not saved
    assert proc.returncode == 0, proc.stderr
    import json
    import zipfile
    with zipfile.ZipFile(tmp_path / "sam_ch02.zip") as zf:
        names = set(zf.namelist())
        manifest = json.loads(zf.read("manifest.json"))
    assert {"manifest.json", "course_lib/attention.py"} <= names
    assert manifest["learner"] == "sam" and manifest["chapter"] == "02" and "torch" in manifest
    assert not any(n.startswith("course_lib/provided") for n in names)
    (tmp_path / "sam_ch02" / "course_lib" / "attention.py").write_text(plant.REFERENCE)
    proc = course(*grade_args(tmp_path / "sam_ch02", tmp_path / "out", jobs=1))
    assert proc.returncode == 0, proc.stderr
    rows = plant.read_csv(tmp_path / "out" / "grades.csv")
    assert vectors(rows)["sam"] == plant.FULL
    assert any(r["kind"] == "submission" and r["status"] == "warning" for r in rows)
    bad = course("submit", "ch02", "--notebook", str(tmp_path / "nope.ipynb"))
    assert bad.returncode == 2 and "notebook not found" in bad.stderr
