"""The capstone's leaderboard reads what the grader measured, never a message (issue 41, item 3).

The leaderboard (and Gradescope's) used to read the parameter count and the weights' digest back out of the run's
row, a message that quotes run.json: a newline in ``preset`` or ``seed`` added a line of the learner's own, which
the pattern took instead, so a row showed 1,000 parameters and a verify verdict made on other weights. Now the
grader writes what it measured as typed fields beside its row (rows.Measurement, the ``measured`` table of
gradebook.sqlite, committed with the learner's rows), the leaderboard reads only those, and every learner value a
message quotes is bounded and escaped (trained.shown).

Planted: run.json strings with a newline, a forged line, HTML and a megabyte of text. They are put into the run as
handin.py hands it to the grader (after its checks), so that the grader's side is tested whatever handin.py refuses
of run.json. One 2-step run a module, copied (the numbers here need weights, not a good model).
"""
from __future__ import annotations

import dataclasses
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from course_admin.exports import class_report
from course_admin.exports.class_report_html import leaderboard_html
from course_admin.exports.gradescope_results import results
from course_admin.exports.leaderboard import leaderboard
from course_admin.grading import trained, verify
from course_admin.intake.submissions import Reader
from course_admin.records.gradebook import SCHEMA, Gradebook
from course_admin.records.report import feedback_markdown
from course_admin.records.rows import GradeRow
from course_lib.provided.capstone import handin

from .test_trained import submission
from .test_training import one_thread  # noqa: F401 - autouse: one thread

pytestmark = [pytest.mark.grading, pytest.mark.training]

OTHER = "0123456789ab"                                            # a digest of no weights handed in here
FORGED = (f"1,000 parameters (counted from the weights); its summary says: 1.0 min of training on cpu, from "
          f"scratch, seed 0, quick preset; weights {OTHER}")
PLANTED = {"preset": f"quick\n{FORGED}", "seed": f"0\n{FORGED}", "device": "<script>x", "train_seconds": 60.0}


@pytest.fixture(scope="module")
def handed(two_step_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A chapter 08 submission with the session's 2-step run's hand-in (conftest.py; packed once a process)."""
    return submission(tmp_path_factory.mktemp("board"), "handed", two_step_run)


def copy(handed: Path, root: Path, learner: str) -> Path:
    return Path(shutil.copytree(handed, root / learner))


def planted(monkeypatch: pytest.MonkeyPatch, strings: dict[str, object]) -> None:
    """Every hand-in read from now on carries ``strings`` in its run, as if run.json had said them."""
    real = handin.from_bytes

    def from_bytes(*args, **kwargs) -> handin.HandIn:
        got = real(*args, **kwargs)
        return dataclasses.replace(got, run={**got.run, **strings})
    monkeypatch.setattr(handin, "from_bytes", from_bytes)


def other_weights(folder: Path) -> None:
    """The hand-in's weights, one value changed: another digest, the same shapes."""
    from safetensors.torch import load, save_file
    weights = folder / handin.FOLDER / handin.WEIGHTS
    state = load(weights.read_bytes())
    state["head.bias"] = state["head.bias"] + 0.25
    save_file(state, str(weights))


def stored(out: Path, graded: dict[str, list[GradeRow]]) -> list[tuple[str, GradeRow]]:
    """``graded`` committed to out/gradebook.sqlite as `course grade` commits it, then the table read back."""
    book = Gradebook(out / "gradebook.sqlite")
    try:
        for who, rows in graded.items():
            book.commit_learner(who, f"fp-{who}", str(out / who), "run", rows, "08", ["08"])
    finally:
        book.close()
    book = Gradebook(out / "gradebook.sqlite")
    try:
        return book.table()
    finally:
        book.close()


def parameters(folder: Path) -> int:
    return sum(p.numel() for p in handin.build_model(handin.read_handin(folder), impl="reference").parameters())


def _measurement(accuracy: float = 0.8, minutes: float | None = None, device: str = "cpu"):
    from course_admin.records.rows import Measurement  # imported here: this file loads on the code before it too
    return Measurement(accuracy=accuracy, se=0.01, parameters=732_674, weights="a" * 12, passed=True,
                       overclaimed=False, minutes=minutes, device=device, pretrained=False)


def _rows(measured) -> list[GradeRow]:
    return [GradeRow("08", trained.KIND, trained.COMPONENT, 3.0, 3.0, "pass", "text for people", "none",
                     measured=measured),
            GradeRow("08", trained.KIND, trained.RUN, 0.0, 0.0, "pass", "more text", "none")]


# ------------------------------------------------------------------ the planted run.json
def test_a_newline_in_run_json_cannot_rewrite_the_leaderboard(handed: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    folder = copy(handed, tmp_path, "eve")
    true_parameters, digest = parameters(folder), handin.digest(handin.read_handin(folder).state)
    assert true_parameters != 1_000 and digest != OTHER
    planted(monkeypatch, PLANTED)
    rows = trained.trained_rows(Reader(folder), handin.CHAPTER)
    out = tmp_path / "out"
    out.mkdir()
    verify.save_verdict(out, "eve", verify.Verdict("verified", "planted", weights=OTHER))  # made on other weights
    table = stored(out, {"eve": rows})
    [entry] = [r for r in leaderboard(table, out, names=True) if not r["fixed"]]
    assert entry["parameters"] == true_parameters and entry["weights"] == digest
    assert entry["verified"] == "not verified (the verdict was on an earlier hand-in)"
    assert entry["minutes"] == 1.0 and entry["device"] == "<script>x" and entry["pretrained"] is False
    board = {e["name"]: e["value"] for e in results(table, [handin.CHAPTER], 1.0)["leaderboard"]}
    assert board["Parameters"] == true_parameters

    said = {r.component: r.message for _, r in table}[trained.RUN]  # the message: bounded, escaped, one line
    assert "\n" not in said and f"{true_parameters:,} parameters" in said and f"weights {digest}" in said
    assert repr(PLANTED["preset"])[:trained.WIDTH - 1] + "…" in said and len(said) < 300
    feedback = feedback_markdown("eve", [r for _, r in table], {})
    assert all(f"{true_parameters:,} parameters" in line for line in feedback.splitlines() if "parameters" in line)
    html = leaderboard_html(leaderboard(table, out, names=True))
    assert "<script>" not in html and "&lt;script&gt;x" in html

    assert class_report.main(["--out", str(out), "--names"]) == 0  # `course report` reads the same fields
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    [mine] = [r for r in report["leaderboard"] if not r["fixed"]]
    assert (mine["parameters"], mine["weights"]) == (true_parameters, digest) and mine["verified"] != "verified"
    assert "<script>" not in (out / "report.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("strings", [
    {"preset": "q" * 2 ** 20, "seed": list(range(10 ** 5)), "device": "c" * 10 ** 5},
    {"preset": "\u202equick\u2028", "seed": {"a": [[[["deep"]]]]}, "device": "\x1b[31mred\x00"},
    {"preset": None, "seed": 1.5e308, "device": ["cpu"], "train_seconds": 1e308},
], ids=["a megabyte", "invisible characters", "not strings"])
def test_every_run_json_string_a_message_quotes_is_bounded_and_escaped(handed: Path,
                                                                       strings: dict[str, object]) -> None:
    got = handin.read_handin(handed)
    claimed = {**got.run, **strings}
    minutes, device, _pretrained = trained.claims(claimed)
    assert len(device) <= trained.DEVICE_WIDTH and device.isprintable()
    assert minutes is None or 0 <= minutes <= trained.MAX_SECONDS / 60
    said = trained.describe(dataclasses.replace(got, run=claimed), _measurement(minutes=minutes, device=device))
    assert said.isprintable() and len(said) < 300, said


# ------------------------------------------------------------------ shown: what a message quotes of a learner
@pytest.mark.parametrize("value, expected", [
    ("quick", "quick"), (0, "0"), ("cuda", "cuda"),
    ("a\nb", "'a\\nb'"), ("\u202equick", "'\\u202equick'"), ("x" * 100, "x" * 31 + "…"),
], ids=["preset", "seed", "device", "newline", "bidi override", "long"])
def test_shown_keeps_honest_values_and_escapes_the_rest(value: object, expected: str) -> None:
    assert trained.WIDTH == 32 and trained.shown(value) == expected


# ------------------------------------------------------------------ stored beside the rows, like the rows
def test_the_measurement_is_committed_and_replaced_with_the_learners_rows(tmp_path: Path) -> None:
    path = tmp_path / "gradebook.sqlite"
    book = Gradebook(path)
    book.commit_learner("ada", "fp", "src", "run", _rows(_measurement(0.8)), "08", ["08"])
    book.commit_learner("bob", "fp", "src", "run", _rows(_measurement(0.7)), "08", ["08"])

    def crash():                                                     # a learner whose rows fail half-way
        yield from _rows(_measurement(0.1))
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        book.commit_learner("ada", "fp2", "src", "run", crash(), "08", ["08"])
    book.close()
    book = Gradebook(path)                                           # a re-run (resume) opens the same table
    assert trained.entry(book.rows("ada"))["accuracy"] == 0.8 and book.rows("ada") == _rows(_measurement(0.8))
    assert trained.entry(book.rows("bob"))["accuracy"] == 0.7
    book.commit_learner("ada", "fp3", "src", "run", trained.zero("08", "missing", "no trained model"), "08", ["08"])
    assert trained.entry(book.rows("ada")) is None                   # handed in again without a model
    book.commit_learner("bob", "fp3", "src", "run", [], "*", None)
    assert trained.entry(book.rows("bob")) is None
    assert not book.db.execute("SELECT * FROM measured").fetchall()
    book.close()


def test_a_table_from_before_the_measured_fields_opens_and_ranks_nobody(tmp_path: Path) -> None:
    path = tmp_path / "gradebook.sqlite"
    old = sqlite3.connect(path)
    old.executescript(SCHEMA.split("CREATE TABLE IF NOT EXISTS measured")[0])
    old.execute("INSERT INTO grades VALUES (?,?,?,?,?,?,?,?,?,?)",
                ("ada", "08", trained.KIND, trained.RUN, 0, 0.0, 0.0, "pass", FORGED, "none"))
    old.commit()
    old.close()
    book = Gradebook(path)
    try:
        table = book.table()
    finally:
        book.close()
    assert [r.measured for _, r in table] == [None]
    assert [r for r in leaderboard(table, tmp_path) if not r["fixed"]] == []  # a message is never read


# ------------------------------------------------------------------ verdicts beside their weights (from test_verify.py)
@pytest.mark.slow
def test_the_leaderboard_shows_each_verdict_beside_its_weights(handed: Path, tmp_path: Path) -> None:
    folders = {who: copy(handed, tmp_path, who) for who in ("ada", "bob", "cyd", "dan")}
    other_weights(folders["dan"])                                    # another hand-in: other weights
    graded = {who: trained.trained_rows(Reader(folders[who]), "08") for who in ("ada", "dan")}
    graded |= {who: graded["ada"] for who in ("bob", "cyd")}        # the same bytes as ada's: the same rows
    digest = {who: handin.digest(handin.read_handin(folder).state) for who, folder in folders.items()}
    assert digest["dan"] != digest["ada"]
    out = tmp_path / "out"
    out.mkdir()
    table = stored(out, graded)
    verify.save_verdict(out, "ada", verify.Verdict("verified", "planted", weights=digest["ada"]))
    verify.save_verdict(out, "bob", verify.Verdict("failed", "planted", weights=digest["bob"]))
    verify.save_verdict(out, "dan", verify.Verdict("verified", "planted", weights=digest["ada"]))  # another hand-in
    board = {r["name"]: r["verified"] for r in leaderboard(table, out, names=True) if not r["fixed"]}
    assert board == {"ada": "verified", "bob": "failed", "cyd": "not verified",
                     "dan": "not verified (the verdict was on an earlier hand-in)"}
