"""The capstone's trained model, graded: its test accuracy computed here, from the weights alone.

The hand-in (``capstone/`` in a chapter 08 submission, course_lib/provided/capstone/handin.py) is read as data:
safetensors bytes, a summary and a vocabulary, each checked before use. Nothing of the learner's runs here
or anywhere for these rows: the weights are loaded into the *reference* ``TransformerClassifier`` built from
the run's settings, and this process scores it on the test split. The contract of chapter 08 (parameter
names, shapes, the forward pass its checks compare with the reference) is what makes that the learner's
model; a learner's class that computes the contract scores the same, and no code of a learner can raise
the number (the issue's design ran the learner's class in the sandbox and took its logits, which that
code could have made up from the public labels).

Rows, kind "capstone": one of ``handin.POINTS`` points for reaching ``handin.BAR`` (a missing or bad
hand-in: 0, with what is wrong, and the chapter's other rows stand), and a warning row when the run's
summary claims more than was measured.
"""
from __future__ import annotations

import re
import string
from pathlib import Path
from typing import Any

from course_lib.provided import i18n
from course_lib.provided.capstone import handin
from course_lib.provided.i18n import N_, _

from ..intake.submissions import Reader, SubmissionError
from ..records.rows import GradeRow

KIND = "capstone"
COMPONENT = f"trained model: test accuracy of at least {handin.BAR:.0%}"
CLAIM = "trained model: the accuracy run.json claims"
RUN = "trained model: the run"
TEST_REVIEWS = 1_723
MEASURED_RE = re.compile(r"test accuracy (?P<accuracy>\d+\.\d)% ± (?P<se>\d+\.\d)%")
RUN_RE = re.compile(r"(?P<parameters>[\d,]+) parameters .*?: (?P<minutes>[\d.]+|unknown) min of training on "
                    r"(?P<device>\S+), (?P<start>from scratch|pretrained).*?(?:; weights (?P<weights>[0-9a-f]{12}))?$")
# The rows' messages, read back by entry(): in English by the patterns above, in a translation by a pattern made
# from the translated template (_pattern), its fields as these groups.
MEASURED = N_("test accuracy {accuracy} ± {se} (one standard error), computed by the grader from your weights on the "
              "{reviews} test reviews; the bar is {bar}, TF-IDF + LR scores {tfidf}")
MEASURED_GROUPS = {"accuracy": r"(?P<accuracy>\d+\.\d)%", "se": r"(?P<se>\d+\.\d)%"}
DESCRIBED = N_("{parameters} parameters (counted from the weights); its summary says: {minutes} min of training on "
               "{device}, {start}, seed {seed}, {preset} preset; weights {weights}")
DESCRIBED_GROUPS = {"parameters": r"(?P<parameters>[\d,]+)", "minutes": r"(?P<minutes>.+?)",
                    "device": r"(?P<device>.+?)", "start": r"(?P<start>.+?)", "weights": r"(?P<weights>[0-9a-f]{12})"}


def zero(number: str, status: str, message: str) -> list[GradeRow]:
    """The trained-model row of a chapter at 0 points (none for a chapter without one)."""
    if number != handin.CHAPTER:
        return []
    return [GradeRow(number, KIND, COMPONENT, 0.0, handin.POINTS, status, message, "none")]


def _read(reader: Reader) -> handin.HandIn:
    """The submission's hand-in, each file bounded before it is read; HandInError with what is wrong."""
    base = reader.base + handin.FOLDER + "/"
    bound = {handin.WEIGHTS: handin.MAX_BYTES + 2 ** 20, handin.RUN: 2 ** 20, handin.VOCAB: 2 ** 20}

    def data(name: str) -> bytes | None:
        if not reader.exists(base + name):
            return None
        if reader.size(base + name) > bound[name]:
            raise handin.HandInError(_("{folder}/{name} is {size} MB, over the {limit} MB a hand-in may have: pack "
                                       "it again with `make submit CH=08`").format(
                folder=handin.FOLDER, name=name, size=f"{reader.size(base + name) / 2 ** 20:.0f}",
                limit=f"{bound[name] / 2 ** 20:.0f}"))
        try:
            return reader.read(base + name, bound[name])
        except (SubmissionError, OSError) as err:
            raise handin.HandInError(_("{folder}/{name} could not be read ({error})").format(
                folder=handin.FOLDER, name=name, error=err)) from None
    return handin.from_bytes(data(handin.WEIGHTS), data(handin.RUN), data(handin.VOCAB), Path(base))


def measure(reader: Reader) -> tuple[handin.HandIn, float, float, int]:
    """(hand-in, test accuracy, one standard error, parameters), measured with the reference classifier;
    HandInError when the hand-in cannot be."""
    got = _read(reader)
    model = handin.build_model(got, impl="reference")
    accuracy, se = handin.accuracy(model, got, "test")
    return got, accuracy, se, sum(p.numel() for p in model.parameters())


def trained_rows(reader: Reader, number: str) -> list[GradeRow]:
    """Chapter ``number``'s trained-model rows (none but for the capstone). Never raises."""
    if number != handin.CHAPTER:
        return []
    try:
        got, accuracy, se, parameters = measure(reader)
    except handin.HandInError as err:
        status = "missing" if "no trained model" in str(err) else "error"  # handin.from_bytes's words (English)
        return zero(number, status, str(err))
    except Exception as exc:  # noqa: BLE001 - a bug here costs these points only, said plainly
        return zero(number, "error", _("the trained model could not be graded ({type}: {error}); tell your "
                                       "instructor").format(type=type(exc).__name__, error=exc))
    passed = accuracy >= handin.BAR
    said = _(MEASURED).format(accuracy=f"{accuracy:.1%}", se=f"{se:.1%}", reviews=f"{TEST_REVIEWS:,}",
                              bar=f"{handin.BAR:.0%}", tfidf=f"{handin.TFIDF_TEST:.1%}")
    if not passed:
        said += _("; below the bar: train longer (the quick preset reaches about 82%), check chapter 08's checks, "
                  "and hand in the run with the best valid accuracy")
    rows = [GradeRow(number, KIND, COMPONENT, handin.POINTS if passed else 0.0, handin.POINTS,
                     "pass" if passed else "fail", said, "none")]
    rows.append(GradeRow(number, KIND, RUN, 0.0, 0.0, "pass", describe(got, parameters), "none"))
    claimed = got.claimed_test_accuracy
    if claimed > accuracy + max(2 * se, 0.005):
        rows.append(GradeRow(number, KIND, CLAIM, 0.0, 0.0, "warning",
                             _("run.json claims {claimed} on test, the weights handed in score {accuracy}: the "
                               "grader's number counts, and the difference is more than noise").format(
                                 claimed=f"{claimed:.1%}", accuracy=f"{accuracy:.1%}"), "none"))
    return rows


def describe(got: handin.HandIn, parameters: int) -> str:
    """The run in one line: its parameters (counted in the model its weights were loaded into), what its
    summary says (not verified), and the weights' digest (handin.digest)."""
    seconds = got.run.get("train_seconds")
    minutes = f"{seconds / 60:.1f}" if isinstance(seconds, (int, float)) else _("unknown")
    device = str(got.run.get("device", "unknown")).split(":")[0]  # the run's own word (a device's name)
    start = _("pretrained") if got.run.get("pretrained") else _("from scratch")
    return _(DESCRIBED).format(parameters=f"{parameters:,}", minutes=minutes, device=device, start=start,
                               seed=got.run.get("seed", "?"), preset=got.run.get("preset", "?"),
                               weights=handin.digest(got.state))


def _pattern(template: str, groups: dict[str, str]) -> re.Pattern[str]:
    """``template`` as a pattern: its text literally, each field named in ``groups`` as that group (its first
    time), any other field as any text."""
    parts, left = [], dict(groups)
    for literal, name, _spec, _conversion in string.Formatter().parse(template):
        parts.append(re.escape(literal))
        if name is not None:
            parts.append(left.pop(name, ".*?"))
    return re.compile("".join(parts))


def _read_back(message: str, english: re.Pattern[str], template: str, groups: dict[str, str]) -> re.Match[str] | None:
    """``message`` parsed: as English (``english``), else as a translation of ``template`` in any language the
    course speaks (the grade table keeps the language the run was graded in, whatever language reads it now)."""
    found = english.search(message)
    for lang in i18n.LANGUAGES:
        translated = None if found else i18n.catalog(lang).get(template)
        if translated:
            try:
                pattern = _pattern(translated, groups)
            except (ValueError, re.error):  # a translation whose fields do not parse: messages.py's lint says so
                continue
            if set(groups) <= set(pattern.groupindex):  # one that lost a field cannot say it (lint says so too)
                found = pattern.search(message)
    return found


def _words(english: str) -> set[str]:
    """``english`` and its translations (a word a row said in the language it was graded in)."""
    return {english} | {i18n.catalog(lang).get(english) or english for lang in i18n.LANGUAGES}


def entry(rows: list[GradeRow]) -> dict[str, Any] | None:
    """One learner's leaderboard entry from their chapter 08 rows (None without a measured model): accuracy and
    its standard error (the grader's), parameters (counted), minutes, device and start (the run's summary),
    whether run.json claimed more than was measured, and the weights' digest (what a verify verdict names)."""
    by = {r.component: r for r in rows if r.kind == KIND}
    measured = (_read_back(by[COMPONENT].message, MEASURED_RE, MEASURED, MEASURED_GROUPS) if COMPONENT in by
                else None)
    run = _read_back(by[RUN].message, RUN_RE, DESCRIBED, DESCRIBED_GROUPS) if RUN in by else None
    if measured is None or run is None:
        return None
    minutes = run["minutes"]
    return {"accuracy": float(measured["accuracy"]) / 100, "se": float(measured["se"]) / 100,
            "parameters": int(run["parameters"].replace(",", "")),
            "minutes": float(minutes) if re.fullmatch(r"\d+(\.\d*)?", minutes) else None, "device": run["device"],
            "pretrained": run["start"] in _words("pretrained"), "passed": by[COMPONENT].status == "pass",
            "overclaimed": CLAIM in by, "weights": run["weights"] or ""}
