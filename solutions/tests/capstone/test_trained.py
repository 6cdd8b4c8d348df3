"""Chapter 08's trained model, graded (issue 28): the accuracy is the grader's, from the weights alone.

The rows come from grading/trained.py, which reads the hand-in as data and scores it with the reference
classifier. Planted: a strong run (a real quick-preset run, 100 steps with bigram inputs: conftest.py), a weak one (2 steps), a
summary that claims 99%, weights of another model, a pickle, no hand-in: each gets the row it must, and a bug
inside the measurement costs these points only. Then a whole planted class goes through `course grade`.
"""
from __future__ import annotations

import atexit
import json
import math
import shutil
import tempfile
import zipfile
from pathlib import Path

import pytest
import torch

from course_admin.grading import trained
from course_admin.intake.submissions import Reader
from course_lib.provided.capstone import handin, noise
from course_lib.provided.capstone.baselines import BASELINES
from course_lib.provided.capstone.run import main
from course_lib.provided.layout import LAYOUT

from .. import course_cli
from .conftest import GROUP
from .test_training import one_thread  # noqa: F401 - autouse: one thread

pytestmark = [pytest.mark.grading, pytest.mark.training, GROUP]  # conftest.py's quick_run: trained once, on one worker

REPO = LAYOUT.root
RECORDS = sorted((REPO / "book" / "data").glob("capstone_cpu*.json"))


def _run(root: Path, steps: int, seed: int = 0, eval_every: int | None = None, extra: tuple[str, ...] = ()) -> Path:
    cached = [dict(name=name, valid_accuracy=0.111, test_accuracy=0.222, seconds=0.0) for name in BASELINES]
    root.mkdir(parents=True, exist_ok=True)
    (root / "baselines.json").write_text(json.dumps({"split_sizes": [13_870, 1_727, 1_723], "results": cached}))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert main(["finetune", "--model", "transformer", "--quick", "--impl", "reference", "--steps", str(steps),
                     "--eval-every", str(eval_every or min(steps, 200)), "--seed", str(seed), "--out", str(root),
                     "--no-progress", *extra]) == 0
    finally:
        torch.set_num_threads(threads)
    return root / "finetune-transformer-quick"


_PACKED: dict[tuple, Path] = {}


def packed_handin(run: Path) -> Path:
    """``run``'s hand-in folder (``handin.pack``), packed once a process for each state of the run's files and
    copied into each submission: pack scores the weights on valid first (2.4 s a call, about twenty calls a session
    on three runs). A test that changes a run's files gets a fresh pack of them. Scored on one thread, as the
    runs were trained (a module fixture that calls it runs before the autouse ``one_thread``)."""
    files = sorted(p for p in run.rglob("*") if p.is_file())
    key = (str(run), tuple((str(p.relative_to(run)), p.stat().st_size, p.stat().st_mtime_ns) for p in files))
    if key not in _PACKED:
        into = Path(tempfile.mkdtemp(prefix="packed_"))
        atexit.register(shutil.rmtree, into, True)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            _PACKED[key] = handin.pack(run, into, impl="reference")
        finally:
            torch.set_num_threads(threads)
    return _PACKED[key]


def submission(root: Path, learner: str, run: Path | None) -> Path:
    """A chapter 08 submission of the reference's modules, with ``run``'s hand-in (none when None)."""
    folder = root / learner
    (folder / "course_lib").mkdir(parents=True)
    for module in (REPO / "solutions" / "course_ref").glob("*.py"):
        shutil.copyfile(module, folder / "course_lib" / module.name)
    (folder / "manifest.json").write_text(json.dumps({"learner": learner, "chapter": "08"}))
    if run is not None:
        shutil.copytree(packed_handin(run), folder / handin.FOLDER)
    return folder


@pytest.fixture(scope="module")
def weak(two_step_run: Path) -> Path:
    """The session's 2-step run (conftest.py): far below the bar."""
    return two_step_run


@pytest.fixture(scope="module")
def strong(quick_run: Path) -> Path:
    """A real quick-preset run (100 steps of 64 with bigram inputs, about 25 s on one thread; conftest.py): what a
    learner hands in."""
    return quick_run


def rows_of(folder: Path):
    return {r.component: r for r in trained.trained_rows(Reader(folder), handin.CHAPTER)}


# ------------------------------------------------------------------ the bar and the numbers beside it
def test_the_bar_is_the_weakest_recorded_quick_run_less_three_standard_errors() -> None:
    quick = [accuracy for _, accuracy in noise.recorded_quick_runs(RECORDS)]
    assert len(quick) >= 3, RECORDS
    weakest = min(quick)
    assert handin.BAR == noise.derive_bar(quick) == math.floor(100 * (weakest - 3 * (weakest * (1 - weakest)
                                                                                     / 1_723) ** 0.5)) / 100
    majority = min(b["test_accuracy"] for f in RECORDS for b in json.loads(f.read_text())["baselines"])
    assert handin.BAR > majority + 0.2                           # far above guessing the frequent label


def test_the_tfidf_number_shown_is_the_recorded_baseline() -> None:
    tfidf = {round(b["test_accuracy"], 3) for f in RECORDS for b in json.loads(f.read_text())["baselines"]
             if b["name"].startswith("TF-IDF")}
    assert tfidf == {handin.TFIDF_TEST}


# ------------------------------------------------------------------ one submission's rows
def test_a_weak_run_fails_the_bar_with_its_measured_accuracy(weak: Path, tmp_path: Path) -> None:
    rows = rows_of(submission(tmp_path, "weak", weak))
    row = rows[trained.COMPONENT]
    assert (row.status, row.points, row.max_points) == ("fail", 0.0, handin.POINTS)
    summary = json.loads((weak / "summary.json").read_text())
    claimed = (summary.get("best_valid") or summary)["test_accuracy"]
    assert f"test accuracy {claimed:.1%}" in row.message and "below the bar" in row.message
    assert trained.CLAIM not in rows                             # it claims what it scores


def test_the_bar_decides_the_points(weak: Path, tmp_path: Path, monkeypatch) -> None:
    folder = submission(tmp_path, "weak", weak)
    _, accuracy, _, _ = trained.measure(Reader(folder))
    monkeypatch.setattr(handin, "BAR", accuracy)                 # exactly at the bar: reached
    row = rows_of(folder)[trained.COMPONENT]
    assert (row.status, row.points) == ("pass", handin.POINTS) and "below the bar" not in row.message
    monkeypatch.setattr(handin, "BAR", accuracy + 1e-6)
    assert rows_of(folder)[trained.COMPONENT].points == 0.0


def test_a_summary_that_lies_is_named_and_decides_nothing(weak: Path, tmp_path: Path) -> None:
    folder = submission(tmp_path, "liar", weak)
    run_file = folder / handin.FOLDER / handin.RUN
    summary = json.loads(run_file.read_text())
    for part in (summary, summary.get("best_valid") or {}):
        if "test_accuracy" in part:
            part["test_accuracy"] = 0.99
    run_file.write_text(json.dumps(summary))
    rows = rows_of(folder)
    assert rows[trained.COMPONENT].points == 0.0
    assert rows[trained.CLAIM].status == "warning" and "claims 99.0%" in rows[trained.CLAIM].message


@pytest.mark.parametrize("plant, status, said", [
    ("none", "missing", "no trained model in the submission"),
    ("pickle", "error", "is a pickle"),
    ("another model", "error", "do not fit the classifier"),
    ("lstm", "error", "hand in a `--model transformer` run"),
])
def test_bad_hand_ins_score_zero_and_say_why(weak: Path, tmp_path: Path, plant: str, status: str, said: str) -> None:
    folder = submission(tmp_path, plant, None if plant == "none" else weak)
    weights = folder / handin.FOLDER / handin.WEIGHTS
    if plant == "pickle":
        torch.save({"head.weight": torch.zeros(2, 2)}, weights)
    if plant == "another model":                                 # a bigger model's weights beside these settings
        from safetensors.torch import load, save_file
        state = load(weights.read_bytes())
        state["head.weight"] = torch.zeros(2, 256)
        save_file(state, str(weights))
    if plant == "lstm":
        run_file = folder / handin.FOLDER / handin.RUN
        run_file.write_text(json.dumps({**json.loads(run_file.read_text()), "model": "lstm"}))
    [row] = trained.trained_rows(Reader(folder), handin.CHAPTER)
    assert (row.status, row.points, row.max_points) == (status, 0.0, handin.POINTS) and said in row.message


def test_a_zip_reads_as_the_folder_does(weak: Path, tmp_path: Path) -> None:
    folder = submission(tmp_path, "zipped", weak)
    archive = tmp_path / "zipped_ch08.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                zf.write(path, f"zipped_ch08/{path.relative_to(folder).as_posix()}")
    assert trained.measure(Reader(archive))[1:] == trained.measure(Reader(folder))[1:]


def test_a_bug_in_the_measurement_costs_these_points_only(weak: Path, tmp_path: Path, monkeypatch) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("planted")
    folder = submission(tmp_path, "w", weak)
    monkeypatch.setattr(handin, "accuracy", broken)
    [row] = trained.trained_rows(Reader(folder), handin.CHAPTER)
    assert row.status == "error" and "RuntimeError: planted" in row.message and row.points == 0.0


def test_other_chapters_have_no_trained_model(weak: Path, tmp_path: Path) -> None:
    assert trained.trained_rows(Reader(submission(tmp_path, "w", weak)), "07") == []
    assert trained.zero("07", "error", "x") == []


# ------------------------------------------------------------------ a planted class through `course grade`
@pytest.mark.slow
@pytest.mark.long  # handed out early (suite_times.py): not the run's last minute
def test_a_planted_class_grades_as_expected(strong: Path, weak: Path, tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    for learner, run in (("strong", strong), ("weak", weak), ("liar", weak), ("nothing", None), ("huge", weak)):
        submission(subs, learner, run)
    liar = subs / "liar" / handin.FOLDER / handin.RUN
    liar.write_text(json.dumps({**json.loads(liar.read_text()), "test_accuracy": 0.99, "best_valid": None}))
    from safetensors.torch import load, save_file                 # oversized: 10**8 bigram rows declared in no bytes
    huge = subs / "huge" / handin.FOLDER / handin.WEIGHTS
    save_file({**load(huge.read_bytes()), "embed.keys": torch.empty(10**8, 0, dtype=torch.long)}, str(huge))
    out = tmp_path / "out"
    proc = course_cli.run(["grade", str(subs), "--out", str(out),
                           "--jobs", "2", "--no-notebooks", "--trust-learners", "--chapters", "ch08"],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    import csv
    with open(out / "grades.csv", newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["kind"] == trained.KIND]
    got = {(r["learner"], r["component"]): r for r in rows}
    assert got["strong", trained.COMPONENT]["status"] == "pass"
    assert float(got["strong", trained.COMPONENT]["points"]) == handin.POINTS
    assert {got[who, trained.COMPONENT]["status"] for who in ("weak", "liar")} == {"fail"}
    assert got["nothing", trained.COMPONENT]["status"] == "missing"
    assert got["huge", trained.COMPONENT]["status"] == "error" and "embed.keys (100000000, 0)" in got[
        "huge", trained.COMPONENT]["message"]
    assert got["liar", trained.CLAIM]["status"] == "warning" and ("strong", trained.CLAIM) not in got
    assert "peak memory" in proc.stdout, proc.stdout[-2000:]
    with open(out / "totals.csv", newline="", encoding="utf-8") as fh:
        totals = [r for r in csv.DictReader(fh) if r["kind"] == trained.KIND]
    assert sorted(float(r["max_points"]) for r in totals) == [handin.POINTS] * 5   # every learner out of the same
    feedback = (out / "feedback" / "strong.md").read_text(encoding="utf-8")
    assert "### Trained model: 3 / 3" in feedback and "TF-IDF + LR scores 83.9%" in feedback
    report = course_cli.run(["report", "--out", str(out), "--names"],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr[-2000:]
    board = json.loads((out / "report.json").read_text(encoding="utf-8"))["leaderboard"]
    learners = [r for r in board if not r["fixed"]]
    assert [r["name"] for r in learners][0] == "strong" and {r["name"] for r in learners} == {"strong", "weak", "liar"}
    assert {r["name"]: r["overclaimed"] for r in learners} == {"strong": False, "weak": False, "liar": True}
    assert learners[0]["accuracy"] >= handin.BAR and "Capstone leaderboard" in (out / "report.html").read_text()


# ------------------------------------------------------------------ Gradescope: the model's rows and a leaderboard
def test_gradescope_results_carry_the_model_and_its_leaderboard(weak: Path, tmp_path: Path) -> None:
    from course_admin.exports.gradescope_results import results
    folder = submission(tmp_path, "w", weak)
    _, accuracy, se, _ = trained.measure(Reader(folder))
    out = results([("w", r) for r in trained.trained_rows(Reader(folder), handin.CHAPTER)], [handin.CHAPTER], 1.0)
    test = next(t for t in out["tests"] if t["name"] == trained.COMPONENT)
    assert test["visibility"] == "visible" and test["max_score"] == handin.POINTS and test["status"] == "failed"
    board = {e["name"]: e["value"] for e in out["leaderboard"]}
    assert abs(board["Test accuracy"] - accuracy) <= 0.0005 + 1e-9 and abs(board["± 1 SE"] - se) <= 0.0005 + 1e-9
    assert board["Parameters"] == sum(p.numel() for p in handin.build_model(handin.read_handin(folder),
                                                                            impl="reference").parameters())
    assert board["Pretrained (claimed)"] == "no" and board["Device (claimed)"] == "cpu"
    nothing = results([("n", r) for r in trained.trained_rows(Reader(submission(tmp_path, "n", None)), "08")],
                      [handin.CHAPTER], 1.0)
    assert "leaderboard" not in nothing and nothing["tests"][0]["score"] == 0.0


# ------------------------------------------------------------------ the class leaderboard of `course report`
def test_the_leaderboard_ranks_measured_models_beside_the_fixed_rows(weak: Path, tmp_path: Path) -> None:
    from course_admin.exports.leaderboard import KEY_FILE, leaderboard, pseudonym
    folder = submission(tmp_path, "ada", weak)
    table = [("ada", r) for r in trained.trained_rows(Reader(folder), handin.CHAPTER)]
    table += [("bob", r) for r in trained.zero(handin.CHAPTER, "missing", "no trained model")]
    board = leaderboard(table, tmp_path)
    mine = [r for r in board if not r["fixed"]]
    assert len(mine) == 1                                         # bob handed in no model
    key = bytes.fromhex((tmp_path / KEY_FILE).read_text())
    assert mine[0]["name"] == pseudonym("ada", key) and "ada" not in json.dumps(board)
    assert [r["name"] for r in leaderboard(table, tmp_path) if not r["fixed"]] == [mine[0]["name"]]  # stable
    assert [r["name"] for r in leaderboard(table, tmp_path, names=True) if not r["fixed"]] == ["ada"]
    _, accuracy, _, parameters = trained.measure(Reader(folder))
    assert abs(mine[0]["accuracy"] - accuracy) <= 0.0005 + 1e-9 and mine[0]["parameters"] == parameters
    assert mine[0]["verified"] == "not verified"
    fixed = {r["name"]: r for r in board if r["fixed"]}
    assert any(name.startswith("baseline: TF-IDF") for name in fixed)
    assert any(name.startswith("reference: ") for name in fixed)
    assert [r["accuracy"] for r in board] == sorted((r["accuracy"] for r in board), reverse=True)
