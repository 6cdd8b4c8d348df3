"""The capstone's class leaderboard, for `course report`: the trained models the grader measured, ranked.

One row per learner whose chapter 08 hand-in was measured (grading/trained.py): the grader's test accuracy
± one standard error, the parameters counted in the model the weights were loaded into, and what the run's
summary says (minutes of training, CPU or GPU, pretrained or not: claimed, not checked). Fixed rows stand
beside them: the baselines and the reference's recorded runs (book/data/capstone_cpu*.json), where those
records are.

Learners are pseudonymous by default: ``learner-`` and six hex digits of an HMAC of the id, keyed by a random
key kept in the report's folder (``.leaderboard_key``), so the same learner has the same name from one report
to the next and nobody without the folder can map ids to names; ``names=True`` shows the ids.

What the leaderboard can prove: that these weights score this accuracy on the test split. Not that the
learner trained them with their code and the settings their summary states: the corpus is public, so weights
could come from anywhere. Nor how the run was picked: every fine-tuning prints its test accuracy, so a learner
who trained many runs and handed in the best on test (`make submit CH=08 RUN=...`; by default it hands in the
best on valid) has chosen on test, and that row is optimistic by up to the spread of the runs tried; the
weights do not show it. The book's chapter 08 says so to learners before they train. Each learner's row says "not verified" until `course verify` (grading/verify.py)
has trained the recorded recipe again with the reference implementation, then its verdict: "verified" (the
re-run lands within run-to-run noise of the hand-in), "failed", "not verifiable" (a GPU run, a pretrained
start, an ensemble) or "unfinished". A verdict counts only beside the weights it was made on (their digest):
a learner who hands in again is "not verified" until verified again.

Every number and the digest are the typed fields the grader wrote beside its measured row (trained.entry,
rows.Measurement; the ``measured`` table of gradebook.sqlite), never read out of a message, which quotes
the learner's run.json: no string of a learner's can change a row here. A table read from grades.csv alone
has no such fields, so its learners are not ranked (the fixed rows still are).
"""
from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from pathlib import Path
from typing import Any

from course_lib.provided.capstone import handin, noise
from course_lib.provided.layout import LAYOUT

from ..grading import trained
from ..grading.verify import load_verdicts
from ..records.rows import GradeRow

KEY_FILE = ".leaderboard_key"
RECORDS = LAYOUT.root / "book" / "data"
Table = list[tuple[str, GradeRow]]


def pseudonym(learner: str, key: bytes) -> str:
    return "learner-" + hmac.new(key, learner.encode("utf-8"), hashlib.sha256).hexdigest()[:6]


def _key(folder: Path) -> bytes:
    path = folder / KEY_FILE
    if not path.is_file():
        path.write_text(secrets.token_hex(16), encoding="utf-8")
        path.chmod(0o600)
    return bytes.fromhex(path.read_text(encoding="utf-8").strip())


def fixed_rows(records: Path = RECORDS) -> list[dict[str, Any]]:
    """The baselines and the reference's recorded runs (the weights of their best valid accuracy), as rows."""
    rows, seen = [], set()
    for path in sorted(records.glob("capstone_cpu*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        for b in record.get("baselines", []):
            if b["name"] not in seen:
                seen.add(b["name"])
                rows.append({"name": f"baseline: {b['name']}", "accuracy": b["test_accuracy"], "parameters": None,
                             "minutes": b["seconds"] / 60, "device": "cpu", "pretrained": False,
                             "verified": "recorded"})
        for run in record.get("finetune", []):
            chosen = run.get("best_valid") or run
            rows.append({"name": f"reference: {run['name']} ({path.stem})", "accuracy": chosen["test_accuracy"],
                         "parameters": run.get("parameters"), "minutes": run.get("train_seconds", 0) / 60,
                         "device": "cpu", "pretrained": bool(run.get("pretrained")), "verified": "recorded"})
    for row in rows:
        row["se"] = noise.standard_error(row["accuracy"], trained.TEST_REVIEWS)
        row["fixed"] = True
    return rows


def verified(entry: dict[str, Any], verdict: dict[str, Any] | None) -> str:
    """A learner row's column: the verify verdict on these weights, else "not verified" (and why)."""
    if verdict is None:
        return "not verified"
    if not entry.get("weights") or verdict.get("weights") != entry["weights"]:
        return "not verified (the verdict was on an earlier hand-in)"
    return str(verdict.get("status", "not verified"))


def leaderboard(table: Table, folder: Path, names: bool = False, records: Path = RECORDS) -> list[dict[str, Any]]:
    """Every measured hand-in and the fixed rows, best test accuracy first."""
    key = None if names else _key(folder)
    by_learner: dict[str, list[GradeRow]] = {}
    for who, row in table:
        if row.chapter == handin.CHAPTER and row.kind == trained.KIND:
            by_learner.setdefault(who, []).append(row)
    verdicts = load_verdicts(folder)
    rows = []
    for who, learner_rows in sorted(by_learner.items()):
        entry = trained.entry(learner_rows)
        if entry is not None:
            rows.append({**entry, "name": who if key is None else pseudonym(who, key), "fixed": False,
                         "verified": verified(entry, verdicts.get(who))})
    return sorted(rows + fixed_rows(records), key=lambda r: -r["accuracy"])
