"""The trusted comparison: what the sandboxed child wrote, decoded as plain data and judged here.

Nothing in this module runs learner code. A child's record (results.py checked and loaded it) is
validated piece by piece. Who wrote a failure is kept in its type: a ``GraderFailure`` is one this
process observed (no result, a time-out, the process ended, a refused result) and its text is the
grader's own; a ``LearnerFailure`` is an exception record, whose text learner code chose.

A hidden case's message is built from that structure, never from a message's wording: the grader's
own text, the spec's text of a known mistake, the name of the learner's file that does not compile
(found by compiling the submitted bytes here), or what kind of output differs (dtype, shape, NaN,
values) found by comparing here; then the property the case checks (``hidden_property``). No text
learner code produced (an exception's message or type, an exit status) reaches a hidden case's row.

A row ``judge_case`` gives is a ``JudgedRow``: it carries what the report-wide rules (diagnose.py) need once every
case of the chapter is judged, the names it gave and a way to judge it again without some of them.
"""
from __future__ import annotations

import re
import signal
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

import torch

from course_lib.provided.i18n import _, language
from course_lib.provided.checking import CheckFailure, compare_one, judge

from ..records.rows import GradeRow
from .plan import Chapter, GradedCase

MAX_MESSAGE = 600


class GraderFailure(CheckFailure):
    """A failure this process observed and worded itself. ``hidden``: the text a hidden case's row
    shows, without what learner code could choose (an exit status); the message itself by default."""

    def __init__(self, message: str, hidden: str | None = None) -> None:
        super().__init__(message)
        self.hidden = message if hidden is None else hidden


class LearnerFailure(CheckFailure):
    """An exception record decoded from the child: its text is learner-controlled. ``str()`` is the child's
    English description (what the spec's RAISES patterns match), ``shown()`` the one in the learner's language."""

    def __init__(self, message: str, shown: str | None = None) -> None:
        super().__init__(message)
        self._shown = message if shown is None else shown

    def shown(self) -> str:
        return self._shown


class _NotTensor:
    pass


class _NotDict:
    pass


# ---------------------------------------------------------------- what the child left
def decode(record: Any) -> Any:
    """The child's record -> a dict of outputs or a failure; anything else raises ValueError."""
    if not isinstance(record, dict) or not isinstance(record.get("kind"), str):
        raise ValueError("not a record")
    kind = record["kind"]
    if kind == "exception":
        message = record.get("message", "raised an exception")  # English: what the spec's RAISES patterns match
        shown = record.get("shown", message if "message" in record else _("raised an exception"))
        if not isinstance(message, str) or not isinstance(shown, str):
            raise ValueError("bad message")
        return LearnerFailure(message[:MAX_MESSAGE], shown[:MAX_MESSAGE])
    if kind == "not_dict":
        name = record.get("type", "object")
        if not isinstance(name, str):
            raise ValueError("bad type name")
        return type(re.sub(r"\W", "_", name[:60]) or "object", (_NotDict,), {})()
    if kind != "outputs" or not isinstance(record.get("outputs"), dict):
        raise ValueError("unknown record")
    outputs = {}
    for key, value in record["outputs"].items():
        if type(value) is torch.Tensor:
            outputs[str(key)] = value
        elif isinstance(value, dict) and isinstance(value.get("not_tensor"), str):
            name = re.sub(r"\W", "_", value["not_tensor"][:60]) or "object"
            outputs[str(key)] = type(name, (_NotTensor,), {})()
        else:
            raise ValueError("bad output value")
    return outputs


def describe_exit(rc: int | None) -> str:
    if rc is None:
        return _("stopped at the time limit")
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = _("signal {number}").format(number=-rc)
        return (_("killed by {name} (killed: often the memory limit)") if name == "SIGKILL" else
                _("killed by {name}")).format(name=name)
    return (_("exit status {rc}: something called os._exit or sys.exit") if rc in (0, 1) else
            _("exit status {rc}")).format(rc=rc)


# ---------------------------------------------------------------- messages of hidden cases
def hidden_property(g: GradedCase) -> str:
    """What a hidden case checks, in the instructor's words: its ``about`` in the learner's language (a message:
    messages.py extracts it), else its name: in English without the ``h-`` prefix ("h-float64-heads" -> "float64
    heads"), in another language as the identifier it is (`h-float64-heads`), no English words. Never its inputs."""
    about = g.case.about.strip()
    if about:
        return _(about)
    return re.sub(r"^h-", "", g.case.name).replace("-", " ").replace("_", " ") if language() == "en" else \
        f"`{g.case.name}`"


def _outputs_problem(g: GradedCase, actual: Any, expected: dict[str, torch.Tensor],
                     inputs: dict[str, torch.Tensor]) -> str:
    """What differs between the learner's outputs and the reference's, compared here, named by the
    reference's output keys and the kind of difference only (never a relation's message: it may quote
    the inputs)."""
    if not isinstance(actual, dict):
        return _("the probe's result is not a dict of tensors")
    missing = [key for key in expected if key not in actual]
    if missing:
        return _("missing result(s): {names}").format(names=", ".join(missing))
    ignore = g.case.ignore(inputs) if g.case.ignore else {}
    free = getattr(g.case, "free", ())  # judged by the case's relation alone, not by the reference's values
    for key, want in expected.items():
        got = actual[key]
        if type(got) is not torch.Tensor:
            return _("{name}: expected a torch.Tensor").format(name=key)
        if key in free:
            continue
        if got.dtype != want.dtype:
            return _("wrong dtype (keep the dtype of the inputs)")
        if tuple(got.shape) != tuple(want.shape):
            return _("wrong shape of {name}").format(name=key)
        if compare_one(key, got, want, g.case.rtol, g.case.atol, ignore.get(key)) is None:
            continue
        if want.is_floating_point() and bool((~torch.isfinite(got) & torch.isfinite(want)).any()):
            return _("{name}: NaN or inf values where the reference is finite").format(name=key)
        return _("{name}: values differ from the reference").format(name=key)
    return _("the outputs break what this case checks between them")  # its relation (checking.Case.relation)


def hidden_message(chapter: Chapter, g: GradedCase, actual: Any, names: list[str], syntax: str | None) -> str:
    """A failed hidden case's message, chosen by where the failure came from (module docstring)."""
    about = _(" (this hidden case checks: {what})").format(what=hidden_property(g))
    if isinstance(actual, GraderFailure):
        return actual.hidden + about
    if names:
        return _(" Or: ").join(_(chapter.spec.MISTAKES[n]) for n in names)
    if isinstance(actual, BaseException):
        return syntax or _("raised an exception") + about
    try:
        return _outputs_problem(g, actual, chapter.expected[g.index], chapter.inputs[g.index]) + about
    except Exception:  # noqa: BLE001 - whatever the child left
        return _("the result could not be compared") + about


def syntax_error(module: str, source: bytes) -> str | None:
    """Why ``source`` (the submitted bytes of ``course_lib/<module>``) does not compile, naming the file
    and the line only; None when it compiles. Compiled here, never run."""
    try:
        compile(source, module, "exec", dont_inherit=True)
    except SyntaxError as exc:
        return (_("cannot import {module}: SyntaxError at line {line}").format(module=module, line=exc.lineno)
                if exc.lineno else _("cannot import {module}: SyntaxError").format(module=module))
    except Exception as exc:  # noqa: BLE001 - RecursionError, MemoryError, NUL bytes: not readable Python
        return _("cannot import {module}: it cannot be read as Python ({type})").format(
            module=module, type=type(exc).__name__)
    return None


# ---------------------------------------------------------------- one case
@dataclass(frozen=True)
class JudgedRow(GradeRow):
    """A row as ``judge_case`` leaves it, with what diagnose.py revises it by; ``plain()`` is the row alone."""

    names: tuple[str, ...] = field(default=(), compare=False, repr=False)   # the known mistakes it names
    explainable: bool = field(default=False, compare=False, repr=False)     # failed on its outputs
    again: Callable[[frozenset[str]], JudgedRow] | None = field(default=None, compare=False, repr=False)

    def plain(self) -> GradeRow:
        return GradeRow(**{f.name: getattr(self, f.name) for f in fields(GradeRow)})


def judge_case(chapter: Chapter, g: GradedCase, actual: Any, isolation: str, syntax: str | None = None,
               ruled_out: frozenset[str] = frozenset()) -> JudgedRow:
    """Score one case from the decoded outputs (or the failure) of the learner's code. ``syntax``: why a
    learner's file of the run does not compile (``syntax_error``), shown on hidden cases that raised.
    ``ruled_out``: known mistakes not to name (the chapter's passed cases exclude them: diagnose.py)."""
    raises = {n: p for n, p in (getattr(chapter.spec, "RAISES", None) or {}).items() if n not in ruled_out}
    try:
        res = judge(chapter.number, g.case, actual, chapter.inputs[g.index], chapter.expected[g.index],
                    {n: w for n, w in chapter.mistakes[g.index].items() if n not in ruled_out},
                    chapter.spec.MISTAKES, raises)
        earned, status, message, names = res.earned, res.status, res.message, res.mistakes
    except Exception as exc:  # noqa: BLE001 - whatever the child left, the batch goes on
        earned, status, message, names = (0.0, "fail", _("the result could not be compared ({type})").format(
            type=type(exc).__name__), [])
    if g.hidden and status != "pass":
        message = hidden_message(chapter, g, actual, names, syntax)
    return JudgedRow(chapter.number, "course_lib", g.label, earned, g.case.points, status, message, isolation,
                     tuple(names), isinstance(actual, dict),
                     lambda ruled: judge_case(chapter, g, actual, isolation, syntax, ruled))


def zero_rows(chapter: Chapter, status: str, message: str, isolation: str = "none") -> list[GradeRow]:
    """Every case of a chapter at 0 points with one message (nothing of the learner's ran)."""
    return [GradeRow(chapter.number, "course_lib", g.label, 0.0, g.case.points, status, message, isolation)
            for g in chapter.cases]
