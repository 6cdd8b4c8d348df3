"""`course capstone verify` (grading/verify.py): a hand-in's recorded command run again on train alone.

Planted: an honest short run (verified, the re-run scoring what the hand-in scores), the weights of a
longer run handed in under the short run's summary (failed: the recorded command does not reach them), a
learner's module that looks for the corpus from inside the sandbox (it finds the package empty and no
valid or test in the box), a GPU run, a pretrained run, an ensemble, settings no command writes, another
vocabulary, a re-run that outlives --timeout, and no bubblewrap (nothing verified). The leaderboard shows
each verdict beside the weights it was made on only.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from course_admin.grading import trained, verify
from course_admin.intake.submissions import Reader
from course_admin.sandbox import cold
from course_lib.provided.capstone import data, handin

from .test_trained import RECORDS, _run, submission
from .test_training import one_thread  # noqa: F401 - autouse: one thread

pytestmark = [
    pytest.mark.skipif(not cold.bwrap_works()[0], reason="verify runs under bubblewrap only"),
    pytest.mark.grading,
    pytest.mark.training,
    pytest.mark.xdist_group("capstone_quick_run"),  # conftest.py's quick_run: trained once, on one worker
]


@pytest.fixture(scope="module")
def short(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 steps, evaluated at 20 and 40: the re-run's best valid step is chosen here, as the run chose it."""
    return _run(tmp_path_factory.mktemp("short"), steps=40, eval_every=20)


@pytest.fixture(scope="module")
def longer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(tmp_path_factory.mktemp("longer"), steps=160)


def edit_run(folder: Path, **changes: object) -> None:
    path = folder / handin.FOLDER / handin.RUN
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


# ------------------------------------------------------------------ the tolerance
def test_the_tolerance_is_three_sd_of_the_difference_of_two_seeds() -> None:
    seeds = handin.seed_spread(RECORDS)
    assert len(seeds) >= 3, RECORDS                               # the cpu run's five members
    mean = sum(seeds) / len(seeds)
    sd = (sum((a - mean) ** 2 for a in seeds) / (len(seeds) - 1)) ** 0.5
    assert verify.TOLERANCE == math.ceil(1000 * 3 * 2 ** 0.5 * sd) / 1000 == handin.rerun_tolerance(seeds)
    assert 0.005 <= verify.TOLERANCE <= 0.05                      # far under the bar's margin over chance


def test_judge_marks_a_gap_over_the_tolerance_as_failed() -> None:
    assert verify.judge(0.80, 40, 0.80 - verify.TOLERANCE).status == "verified"
    assert verify.judge(0.80, 40, 0.90).status == "verified"      # the hand-in claims less than it could
    failed = verify.judge(0.80, 40, 0.80 - verify.TOLERANCE - 0.001)
    assert failed.status == "failed" and "points below it" in failed.message


# ------------------------------------------------------------------ re-runs in the sandbox
@pytest.mark.slow
def test_an_honest_run_is_verified_by_its_re_run(short: Path, tmp_path: Path) -> None:
    folder = submission(tmp_path, "zoe", short)
    verdict = verify.verify(Reader(folder), work=tmp_path)
    summary = json.loads((short / "summary.json").read_text())
    assert verdict.status == "verified", verdict.message
    assert verdict.step == summary["best_valid"]["step"]          # the same step chosen on valid
    assert abs(verdict.rerun - verdict.submitted) <= verify.TOLERANCE
    assert verdict.submitted == trained.measure(Reader(folder))[1]
    assert verdict.weights == handin.digest(handin.read_handin(folder).state)


@pytest.mark.slow
def test_a_bigram_run_sends_weights_larger_than_a_grading_frame(tmp_path: Path) -> None:
    """4.3 M parameters (17 MB in float32), over the 4 MiB a case's result may have: the re-run's frames are
    bounded by verify's own limit, and such a run verifies too."""
    run = _run(tmp_path / "bigrams", steps=20, extra=("--bigrams", "5"))
    assert json.loads((run / "summary.json").read_text())["parameters"] * 4 > 4 * 1024**2
    verdict = verify.verify(Reader(submission(tmp_path, "bea", run)), work=tmp_path)
    assert verdict.status == "verified", verdict.message


@pytest.mark.slow
def test_weights_the_recorded_command_does_not_reach_fail(short: Path, longer: Path, tmp_path: Path) -> None:
    folder = submission(tmp_path, "max", longer)                  # 160 steps' weights ...
    recorded = json.loads((short / "summary.json").read_text())   # ... under the 40-step run's summary
    (folder / handin.FOLDER / handin.RUN).write_text(json.dumps(recorded))
    verdict = verify.verify(Reader(folder), work=tmp_path)
    assert verdict.status == "failed" and "points below it" in verdict.message, verdict.message
    assert verdict.submitted - verdict.rerun > verify.TOLERANCE


def test_the_sandbox_holds_the_train_split_alone(short: Path, tmp_path: Path) -> None:
    folder = submission(tmp_path, "eve", short)
    corpus = data.package_dir().resolve()
    with open(folder / "course_lib" / "classifier.py", "a", encoding="utf-8") as fh:
        fh.write(f"\nimport os as _os\nraise RuntimeError('planted saw ' + repr(sorted(_os.listdir({str(corpus)!r})))"
                 " + repr(sorted(_os.listdir('/sandbox'))))\n")
    verdict = verify.verify(Reader(folder), work=tmp_path)
    assert verdict.status == "failed" and "planted saw []" in verdict.message, verdict.message  # the package: empty
    box = verdict.message.split("planted saw []", 1)[1]
    assert "train.json" in box and not any(word in box for word in ("valid", "test", "neg.txt"))
    assert (corpus / "sentiment" / "neg.txt").is_file()           # out of the box, it is there


@pytest.mark.slow
def test_a_re_run_past_the_timeout_is_unfinished(short: Path, tmp_path: Path) -> None:
    folder = submission(tmp_path, "slow", short)
    with open(folder / "course_lib" / "classifier.py", "a", encoding="utf-8") as fh:
        fh.write("\nimport time as _time\n_time.sleep(600)\n")
    edit_run(folder, train_seconds=1.0)
    verdict = verify.verify(Reader(folder), timeout_s=20, work=tmp_path)
    assert verdict.status == "unfinished" and "--timeout 20 s" in verdict.message, verdict.message


# ------------------------------------------------------------------ decided before anything runs
@pytest.mark.parametrize("changes, status, said", [
    ({"device": "cuda:0"}, "not verifiable", "this sandbox has no GPU"),
    ({"pretrained": "/runs/pretrain-transformer-quick"}, "not verifiable", "pretraining run"),
    ({"seeds": 5}, "not verifiable", "an ensemble of 5 seeds"),
    ({"train_seconds": 3000.0}, "not verifiable", "50 min of training"),
    ({"warmup": 7}, "failed", "warmup 7 (the options give 5)"),
    ({"preset": "huge"}, "failed", "a known preset"),
])
def test_runs_verify_cannot_re_run_say_why(short: Path, tmp_path: Path, changes: dict, status: str, said: str,
                                           monkeypatch) -> None:
    monkeypatch.setattr(verify, "rerun", lambda *a, **k: pytest.fail("nothing may run"))
    folder = submission(tmp_path, "x", short)
    edit_run(folder, **changes)
    verdict = verify.verify(Reader(folder), work=tmp_path)
    assert (verdict.status, verdict.weights) == (status, handin.digest(handin.read_handin(folder).state))
    assert said in verdict.message, verdict.message


def test_another_vocabulary_fails_before_the_re_run(short: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(verify, "rerun", lambda *a, **k: pytest.fail("nothing may run"))
    folder = submission(tmp_path, "v", short)
    path = folder / handin.FOLDER / handin.VOCAB
    vocab = json.loads(path.read_text())
    vocab["chars"][0], vocab["chars"][1] = vocab["chars"][1], vocab["chars"][0]  # same size, other text's order
    path.write_text(json.dumps(vocab))
    verdict = verify.verify(Reader(folder), work=tmp_path)
    assert verdict.status == "failed" and "vocabulary" in verdict.message


def test_without_bubblewrap_nothing_is_verified(short: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(cold, "bwrap_works", lambda: (False, "planted: no bwrap"))
    assert verify.main([str(submission(tmp_path, "x", short)), "--out", str(tmp_path / "out")]) == 2
    assert "could read the corpus's test split" in capsys.readouterr().err
    assert not (tmp_path / "out" / verify.VERDICTS).exists()


def test_a_crash_on_one_learner_keeps_every_other_verdict(short: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    subs = tmp_path / "subs"
    for learner in ("ada", "bob", "cyd"):
        submission(subs, learner, short)

    def planted(reader: Reader, *args, **kwargs) -> verify.Verdict:
        if reader.path.name == "bob":
            raise RuntimeError("planted crash")
        return verify.Verdict("verified", "planted", weights="abc")
    monkeypatch.setattr(verify, "verify", planted)
    assert verify.main([str(subs), "--out", str(tmp_path / "out")]) == 1
    assert sorted(verify.load_verdicts(tmp_path / "out")) == ["ada", "cyd"]
    assert "bob: not verified: verify itself failed (RuntimeError: planted crash)" in capsys.readouterr().err


# ------------------------------------------------------------------ the leaderboard shows the verdicts
@pytest.mark.slow
def test_the_leaderboard_shows_each_verdict_beside_its_weights(short: Path, longer: Path, tmp_path: Path) -> None:
    from course_admin.exports.leaderboard import leaderboard
    folders = {"ada": submission(tmp_path, "ada", short), "bob": submission(tmp_path, "bob", short),
               "cyd": submission(tmp_path, "cyd", short), "dan": submission(tmp_path, "dan", longer)}
    table = [(who, r) for who, folder in folders.items() for r in trained.trained_rows(Reader(folder), "08")]
    digest = {who: handin.digest(handin.read_handin(folder).state) for who, folder in folders.items()}
    out = tmp_path / "out"
    out.mkdir()
    verify.save_verdict(out, "ada", verify.Verdict("verified", "planted", weights=digest["ada"]))
    verify.save_verdict(out, "bob", verify.Verdict("failed", "planted", weights=digest["bob"]))
    verify.save_verdict(out, "dan", verify.Verdict("verified", "planted", weights=digest["ada"]))  # another hand-in
    board = {r["name"]: r["verified"] for r in leaderboard(table, out, names=True) if not r["fixed"]}
    assert board == {"ada": "verified", "bob": "failed", "cyd": "not verified",
                     "dan": "not verified (the verdict was on an earlier hand-in)"}


def test_the_presets_recorded_runs_fit_the_default_limits() -> None:
    """A whole quick-preset run (600 steps) as the book recorded it: verify would re-run it under the default
    --timeout, with the options it was made with (the re-run itself is the strong run's, below)."""
    runs = [r for f in RECORDS for r in json.loads(f.read_text())["finetune"]
            if r["preset"] == "quick" and not r.get("pretrained") and r.get("seeds", 1) == 1]  # what verify re-runs
    assert runs and any(r["steps"] == 600 for r in runs), RECORDS
    for run in runs:
        argv = verify.recipe(run, timeout_s=1200.0)
        assert isinstance(argv, list), (run["name"], argv)
        assert argv[argv.index("--steps") + 1] == str(run["steps"])
    planted = {**runs[0], "train_seconds": 601.0}                 # a run over half the timeout is not re-run
    assert verify.recipe(planted, timeout_s=1200.0).status == "not verifiable"


@pytest.mark.slow
def test_a_strong_run_reaches_the_bar_and_is_verified_under_the_default_limits(quick_run: Path,
                                                                               tmp_path: Path) -> None:
    """A strong quick-preset run (300 steps of 64, evaluated three times; conftest.py): re-run in the sandbox under
    the default --timeout and memory, it lands where the hand-in does."""
    run = quick_run
    verdict = verify.verify(Reader(submission(tmp_path, "quinn", run)), work=tmp_path)
    assert verdict.status == "verified", verdict.message
    assert verdict.submitted >= handin.BAR and abs(verdict.rerun - verdict.submitted) <= verify.TOLERANCE


def test_course_capstone_verify_reaches_the_instructors_command(tmp_path: Path, monkeypatch, capsys) -> None:
    from course_lib.provided.capstone.run import main
    monkeypatch.setattr(cold, "bwrap_works", lambda: (False, "planted: no bwrap"))
    assert main(["verify", str(tmp_path / "none"), "--out", str(tmp_path / "out")]) == 2
    assert "course capstone verify: needs bubblewrap (planted: no bwrap)" in capsys.readouterr().err
