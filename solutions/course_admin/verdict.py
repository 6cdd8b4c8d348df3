"""The trusted comparison: what the sandboxed child wrote, decoded as plain data and judged here.

Nothing in this module runs learner code. A child's record is validated piece by piece; a hidden case's
message is redacted so that feedback never shows its inputs, shapes or values.
"""
from __future__ import annotations

import re
import signal
from typing import Any

import torch

from course_lib.provided.checking import CheckFailure, judge

from .plan import Chapter, GradedCase
from .rows import GradeRow


# ---------------------------------------------------------------- what the child left
class _NotTensor:
    pass


def decode(record: Any) -> Any:
    """The child's record -> a dict of outputs or an exception; anything else raises ValueError."""
    if not isinstance(record, dict):
        raise ValueError("not a dict")
    kind = record.get("kind")
    if kind == "exception":
        return CheckFailure(str(record.get("message", "raised an exception"))[:600])
    if kind == "not_dict":
        return type(str(record.get("type", "object"))[:60], (), {})()
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
            raise ValueError(f"bad value for {key!r}")
    return outputs


def describe_exit(rc: int | None) -> str:
    if rc is None:
        return "stopped at the time limit"
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        extra = " (killed: often the memory limit)" if name == "SIGKILL" else ""
        return f"killed by {name}{extra}"
    return f"exit status {rc}" + (": something called os._exit or sys.exit" if rc in (0, 1) else "")


# ---------------------------------------------------------------- messages of hidden cases
_PASS_THROUGH = ("not implemented yet", "missing result", "the probe returned", "not run:", "did not finish",
                 "the grading process", "the result ", "no result")


def redact_hidden(message: str, names: list[str], mistake_messages: dict[str, str]) -> str:
    """A hidden case's message without its inputs, shapes or values."""
    if names:
        return " Or: ".join(mistake_messages[n] for n in names)
    m = message
    key = m.split(":")[0]
    if re.match(r"^[\w.]+: expected a torch\.Tensor", m):
        return m.split(",")[0]
    if re.match(r"^[\w.]+: dtype ", m):
        return "wrong dtype (keep the dtype of the inputs)"
    if re.match(r"^[\w.]+: shape ", m):
        return f"wrong shape of {key}"
    if re.match(r"^[\w.]+: \d+ (NaN|inf) value", m):
        return f"{key}: NaN or inf values where the reference is finite"
    if re.match(r"^[\w.]+: values differ", m):
        return f"{key}: values differ from the reference"
    if m.startswith("raised "):
        where = re.search(r"\(at ([\w.]+:\d+)", m)
        return key + (f" (at {where.group(1)})" if where else "")
    if m.startswith(_PASS_THROUGH):
        return m
    # about the learner's files, never the hidden case: which file does not import, and where
    syntax = re.match(r"^(cannot import [\w.-]+\.py: SyntaxError at line \d+)", m)
    if syntax:
        return syntax.group(1)
    missing = re.match(r"^(course_lib/[\w/]+\.py is missing)", m)
    if missing:
        return missing.group(1)
    if m.startswith("called sys.exit("):
        return "called sys.exit (or exit()): a library function must return, not exit"
    return "failed"


# ---------------------------------------------------------------- one case
def judge_case(chapter: Chapter, g: GradedCase, actual: Any, isolation: str) -> GradeRow:
    """Score one case from the decoded outputs (or the failure) of the learner's code."""
    try:
        res = judge(chapter.number, g.case, actual, chapter.inputs[g.index], chapter.expected[g.index],
                    chapter.mistakes[g.index], chapter.spec.MISTAKES, getattr(chapter.spec, "RAISES", None))
        earned, status, message, names = res.earned, res.status, res.message, res.mistakes
    except Exception as exc:  # noqa: BLE001 - whatever the child left, the batch goes on
        earned, status, message, names = 0.0, "fail", f"the result could not be compared ({type(exc).__name__})", []
    if g.hidden and status != "pass":
        message = redact_hidden(message, names, chapter.spec.MISTAKES)
    return GradeRow(chapter.number, "course_lib", g.label, earned, g.case.points, status, message, isolation)


def zero_rows(chapter: Chapter, status: str, message: str, isolation: str = "none") -> list[GradeRow]:
    """Every case of a chapter at 0 points with one message (nothing of the learner's ran)."""
    return [GradeRow(chapter.number, "course_lib", g.label, 0.0, g.case.points, status, message, isolation)
            for g in chapter.cases]
