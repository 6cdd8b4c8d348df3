"""The checks behind `course check`, the public tests and the grader.

A chapter's *spec* (``tests/specs/chNN.py``) lists its cases. A case makes inputs from a fixed seed,
runs a *probe* (a small function that calls your code and returns a dict of tensors) and compares
the result with the reference's, key by key: type, dtype, shape, NaN/inf, values. When the values
differ, the result is also compared with the outputs of known-wrong implementations, so that the
message can name the mistake ("softmax over the wrong axis") instead of only saying "wrong".
"""
from __future__ import annotations

import math
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
from torch import Tensor

Outputs = dict[str, Tensor]
Probe = Callable[[Any, dict[str, Tensor]], Outputs]


class CheckFailure(Exception):
    """Raised by a probe or a judge with a message for the learner."""


@dataclass(frozen=True)
class Case:
    """One graded check of a chapter.

    make_inputs(seed) must be deterministic. ``ignore(inputs)`` may return, per output key, a bool
    tensor of positions whose values are not graded (they must still be finite).
    """

    name: str
    points: float
    probe: str
    make_inputs: Callable[[int], dict[str, Tensor]]
    seed: int = 0
    about: str = ""
    hint: str = ""
    rtol: float = 1e-4
    atol: float = 1e-5
    ignore: Callable[[dict[str, Tensor]], dict[str, Tensor]] | None = None


@dataclass
class Result:
    chapter: str
    case: str
    points: float
    earned: float
    status: str  # "pass" | "fail"
    message: str = ""
    mistakes: list[str] = field(default_factory=list)


def clone_inputs(inputs: dict[str, Tensor]) -> dict[str, Tensor]:
    return {k: v.clone() if isinstance(v, Tensor) else v for k, v in inputs.items()}


def _index(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for size in reversed(shape):
        out.append(flat % size)
        flat //= size
    return tuple(reversed(out))


def _fmt_shape(shape: Any) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")"


def compare_one(name: str, actual: Any, expected: Tensor, rtol: float, atol: float,
                ignore: Tensor | None = None) -> str | None:
    """Return None when ``actual`` matches ``expected``, else a message saying what differs."""
    if type(actual) is not Tensor:
        return f"{name}: expected a torch.Tensor, got {type(actual).__name__}"
    if actual.dtype != expected.dtype:
        return (f"{name}: dtype {actual.dtype}, expected {expected.dtype} "
                "(keep the dtype of the inputs; do not create tensors with a default dtype)")
    if tuple(actual.shape) != tuple(expected.shape):
        return f"{name}: shape {_fmt_shape(actual.shape)}, expected {_fmt_shape(expected.shape)}"
    a = actual.detach().to("cpu")
    e = expected.detach()
    bad = ~torch.isfinite(a) & torch.isfinite(e) if e.is_floating_point() else None
    if bad is not None and bool(bad.any()):
        n_nan = int(torch.isnan(a).sum())
        first = _index(int(bad.flatten().nonzero()[0]), tuple(a.shape))
        kind = "NaN" if n_nan else "inf"
        return (f"{name}: {int(bad.sum())} {kind} value(s) where the reference is finite, "
                f"first at index {first}")
    graded = torch.ones_like(e, dtype=torch.bool) if ignore is None else ~ignore.expand_as(e)
    if e.is_floating_point():
        close = torch.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True) | ~graded
    else:
        close = (a == e) | ~graded
    if bool(close.all()):
        return None
    diff = (a.double() - e.double()).abs().masked_fill(close, 0.0)
    worst = int(diff.flatten().argmax())
    where = _index(worst, tuple(a.shape))
    return (f"{name}: values differ at {int((~close).sum())} of {int(graded.sum())} positions; "
            f"largest difference {float(diff.flatten()[worst]):.3g} at index {where} "
            f"(got {float(a.flatten()[worst]):.4g}, expected {float(e.flatten()[worst]):.4g})")


def compare(actual: Any, expected: Outputs, rtol: float, atol: float,
            ignore: dict[str, Tensor] | None = None) -> str | None:
    """Compare a probe's outputs with the expected ones; None when they match."""
    if not isinstance(actual, dict):
        return f"the probe returned {type(actual).__name__}, expected a dict of tensors"
    missing = sorted(set(expected) - set(actual))
    if missing:
        return f"missing result(s): {', '.join(missing)}"
    for key in expected:
        message = compare_one(key, actual[key], expected[key], rtol, atol, (ignore or {}).get(key))
        if message:
            return message
    return None


def matching_mistakes(actual: Outputs, mistakes: dict[str, Outputs], expected: Outputs,
                      rtol: float, atol: float) -> list[str]:
    """Names of the known-wrong variants whose outputs ``actual`` reproduces (NaNs included)."""
    found = []
    for name, wrong in mistakes.items():
        if compare(wrong, expected, rtol, atol) is None:
            continue  # this variant is not wrong on this case: it tells nothing
        if compare(actual, wrong, rtol, atol) is None:
            found.append(name)
    return found


def _describe_exception(exc: BaseException) -> str:
    if isinstance(exc, NotImplementedError):
        return f"not implemented yet: {exc}" if str(exc) else "not implemented yet"
    if isinstance(exc, CheckFailure):
        return str(exc)
    if isinstance(exc, ModuleNotFoundError) and (exc.name or "").startswith("course_lib."):
        return f"{exc.name.replace('.', '/')}.py is missing: restore it (git checkout) and implement it"
    if isinstance(exc, SyntaxError):
        return f"cannot import {Path(exc.filename or '?').name}: SyntaxError at line {exc.lineno}: {exc.msg}"
    if isinstance(exc, SystemExit):
        return f"called sys.exit({exc.code!r}) (or exit()): a library function must return, not exit"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "course_lib" in f.filename
              and "provided" not in f.filename]
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno}: {frames[-1].line})" if frames else ""
    return f"raised {type(exc).__name__}: {exc}{where}"


def judge(chapter: str, case: Case, actual: Outputs | BaseException, inputs: dict[str, Tensor],
          expected: Outputs, mistakes: dict[str, Outputs], mistake_messages: dict[str, str]) -> Result:
    """Turn a probe's outputs (or the exception it raised) into a scored, explained result."""
    def fail(message: str, names: list[str] | None = None) -> Result:
        return Result(chapter, case.name, case.points, 0.0, "fail", message, names or [])

    if isinstance(actual, BaseException):
        return fail(_describe_exception(actual))
    ignore = case.ignore(inputs) if case.ignore else None
    message = compare(actual, expected, case.rtol, case.atol, ignore)
    if message is None:
        return Result(chapter, case.name, case.points, case.points, "pass")
    names = matching_mistakes(actual, mistakes, expected, case.rtol, case.atol)
    if names:
        known = " Or: ".join(mistake_messages[n] for n in names)
        return fail(f"{known} [{message}]", names)
    return fail(f"{message}. {case.hint}".strip() if case.hint else message)


def run_probe(probes: dict[str, Probe], case: Case, impl: Any, inputs: dict[str, Tensor]) -> Outputs | BaseException:
    """Run one probe on copies of the inputs; an exception is returned, not raised."""
    try:
        return probes[case.probe](impl, clone_inputs(inputs))
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - learner code may raise anything, SystemExit included
        return exc


def total(results: list[Result]) -> tuple[float, float]:
    return (math.fsum(r.earned for r in results), math.fsum(r.points for r in results))
