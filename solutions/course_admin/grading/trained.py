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
summary claims more than was measured. The measured row carries what was measured as typed fields
(rows.Measurement, stored in the grade table's ``measured`` table): the leaderboard and Gradescope's read
those (``entry``), never a message, which is text for the learner and quotes their run.json. Every value of
run.json a message quotes is bounded and escaped (``shown``): a newline or a control character in it shows
as its escape, so no learner string can add a line to a report.
"""
from __future__ import annotations

import math
import reprlib
from dataclasses import asdict
from pathlib import Path
from typing import Any

from course_lib.provided.capstone import handin
from course_lib.provided.i18n import N_, _

from ..intake.submissions import Reader, SubmissionError
from ..records.rows import TRAINED_BAR, GradeRow, Measurement

KIND = "capstone"
COMPONENT = TRAINED_BAR.format(bar=f"{handin.BAR:.0%}")  # the rows' names: English keys of the grade table
CLAIM = N_("trained model: the accuracy run.json claims")
RUN = N_("trained model: the run")
TEST_REVIEWS = 1_723
RECORD = "capstone=measured"  # in `course grade`'s fingerprint: tables graded before the measured fields regrade
WIDTH = 32                    # characters of a learner's value a message shows (shown)
DEVICE_WIDTH = 16             # of the claimed device's name (as handin.py bounds it)
ERROR_WIDTH = 1_000           # of an error's text, which may quote the hand-in
MAX_SECONDS = 10 ** 9         # claimed training time beyond this (31 years) is no number of minutes
MEASURED = N_("test accuracy {accuracy} ± {se} (one standard error), computed by the grader from your weights on the "
              "{reviews} test reviews; the bar is {bar}, TF-IDF + LR scores {tfidf}")
DESCRIBED = N_("{parameters} parameters (counted from the weights); its summary says: {minutes} min of training on "
               "{device}, {start}, seed {seed}, {preset} preset; weights {weights}")
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 2, WIDTH + 2, WIDTH


def shown(value: object, width: int = WIDTH) -> str:
    """A learner's value as a message shows it: a printable string as it is, anything else (a string with a
    newline, a tab, a control or an invisible character; a number; a list) as its repr, where those are
    escaped; at most ``width`` characters, cut with "…". Of a value of any size, only a bounded part is read
    (a string's first ``width`` characters; reprlib's few items of a list)."""
    if isinstance(value, str):
        head = value[:width + 1]
        text = head if head.isprintable() else repr(head)
    else:
        text = _REPR.repr(value)
    return text if len(text) <= width else text[:width - 1] + "…"


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


def claims(run: dict[str, Any]) -> tuple[float | None, str, bool]:
    """(minutes of training, device, pretrained) as the run's summary claims them (not checked), typed and
    bounded: minutes None where not a number of seconds from 0 to MAX_SECONDS; the device's name without its
    index (``cuda:0``: ``cuda``), shown."""
    seconds = run.get("train_seconds")
    number = isinstance(seconds, (int, float)) and not isinstance(seconds, bool)
    minutes = seconds / 60 if number and math.isfinite(seconds) and 0 <= seconds <= MAX_SECONDS else None
    device = run.get("device", "unknown")
    name = device.split(":")[0] if isinstance(device, str) else device
    return minutes, shown(name, DEVICE_WIDTH), bool(run.get("pretrained"))


def trained_rows(reader: Reader, number: str) -> list[GradeRow]:
    """Chapter ``number``'s trained-model rows (none but for the capstone). Never raises."""
    if number != handin.CHAPTER:
        return []
    try:
        got, accuracy, se, parameters = measure(reader)
    except handin.HandInError as err:
        status = "missing" if err.missing else "error"
        return zero(number, status, shown(str(err), ERROR_WIDTH))
    except Exception as exc:  # noqa: BLE001 - a bug here costs these points only, said plainly
        return zero(number, "error", _("the trained model could not be graded ({type}: {error}); tell your "
                                       "instructor").format(type=type(exc).__name__,
                                                            error=shown(str(exc), ERROR_WIDTH)))
    passed = accuracy >= handin.BAR
    said = _(MEASURED).format(accuracy=f"{accuracy:.1%}", se=f"{se:.1%}", reviews=f"{TEST_REVIEWS:,}",
                              bar=f"{handin.BAR:.0%}", tfidf=f"{handin.TFIDF_TEST:.1%}")
    if not passed:
        said += _("; below the bar: train longer (the quick preset reaches about 82%), check chapter 08's checks, "
                  "and hand in the run with the best valid accuracy")
    claimed = got.claimed_test_accuracy
    overclaimed = claimed > accuracy + max(2 * se, 0.005)
    minutes, device, pretrained = claims(got.run)
    measured = Measurement(accuracy=accuracy, se=se, parameters=parameters, weights=handin.digest(got.state),
                           passed=passed, overclaimed=overclaimed, minutes=minutes, device=device,
                           pretrained=pretrained)
    rows = [GradeRow(number, KIND, COMPONENT, handin.POINTS if passed else 0.0, handin.POINTS,
                     "pass" if passed else "fail", said, "none", measured=measured)]
    rows.append(GradeRow(number, KIND, RUN, 0.0, 0.0, "pass", describe(got, measured), "none"))
    if overclaimed:
        rows.append(GradeRow(number, KIND, CLAIM, 0.0, 0.0, "warning",
                             _("run.json claims {claimed} on test, the weights handed in score {accuracy}: the "
                               "grader's number counts, and the difference is more than noise").format(
                                 claimed=f"{claimed:.1%}", accuracy=f"{accuracy:.1%}"), "none"))
    return rows


def describe(got: handin.HandIn, measured: Measurement) -> str:
    """The run in one line: its parameters (counted in the model its weights were loaded into), what its
    summary says (not verified; each value bounded and escaped), and the weights' digest (handin.digest)."""
    minutes = _("unknown") if measured.minutes is None else f"{measured.minutes:.1f}"
    start = _("pretrained") if measured.pretrained else _("from scratch")
    return _(DESCRIBED).format(parameters=f"{measured.parameters:,}", minutes=minutes, device=measured.device,
                               start=start, seed=shown(got.run.get("seed", "?")),
                               preset=shown(got.run.get("preset", "?")), weights=measured.weights)


def entry(rows: list[GradeRow]) -> dict[str, Any] | None:
    """One learner's leaderboard entry from their chapter 08 rows (None without a measured model): the typed
    fields the grader wrote beside its measured row (rows.Measurement), never read out of a message:
    accuracy and its standard error, parameters, whether it passed and whether run.json claimed more, the
    weights' digest (what a verify verdict names), and the minutes, device and start the summary claims."""
    found = [r.measured for r in rows if r.kind == KIND and r.component == COMPONENT and r.measured is not None]
    return asdict(found[0]) if found else None
