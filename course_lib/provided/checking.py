"""The checks behind `course check`, the public tests and the grader.

A chapter's *spec* (``tests/specs/chNN.py``) lists its cases. A case makes inputs from a fixed seed,
runs a *probe* (a small function that calls your code and returns a dict of tensors) and compares
the result with the reference's, key by key: type, dtype, shape, NaN/inf, values. When the values
differ, the result is also compared with the outputs of known-wrong implementations, so that the
message can name the mistake ("softmax over the wrong axis") instead of only saying "wrong".

Two more ways a spec names what went wrong, without false passes:

* ``RAISES = {mistake: regex}``: a known mistake that makes the code *raise* rather than return wrong
  values (filling float16 scores with -1e9 overflows) has no outputs to compare. When the
  description of the exception a case raised ("raised RuntimeError: value cannot be converted to
  type c10::Half without overflow (at ...)") matches the regular expression (``re.search``), the
  result names that mistake. Write patterns specific to the mistake: they are matched on every case.
* A *relation* case (``Case.relation``) checks what must hold between a probe's outputs (dropout keeps
  (x + pe) / (1 - p); more padding changes no logit). Probes only return tensors: the relation runs where
  the comparison is made (the grader's own process), never beside learner code; when no known mistake
  gives the same outputs, a failed relation names those that break the same properties. The case's other
  outputs are compared with the reference's as usual, so that a constant cannot satisfy the relation alone.
* A *ready-made* case (``ready_made_case``, the spec's ``READY_MADE``) is decided by reading the learner's
  source, never by running it: see ``ready_made.py``.

A message claims only what its own evidence shows: a case's ``hint`` follows a failure of the kinds named in
``hint_on`` (a relation's property, the output that differs, or how: "values", "nonfinite", "shape", "dtype",
"type", "missing"), and a value that differs by float32 rounding only is called that, not "wrong".
"""
from __future__ import annotations

import math
import re
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable

import torch
from torch import Tensor

from .i18n import N_, _  # noqa: F401 - the specs use _ too
from .cases import SOURCE_PROBE, Case, CheckFailure, Outputs, Probe, Relation, Result  # noqa: F401 - the specs' names
from .ready_made import judge_source, ready_made_case, ready_made_uses  # noqa: F401 - the specs' names


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


def _fmt_pair(got: float, want: float) -> str:
    """"got -0.2551, expected -0.2552", with as many digits as it takes to tell them apart."""
    for digits in (4, 8, 12, 17):
        a, e = f"{got:.{digits}g}", f"{want:.{digits}g}"
        if a != e:
            break
    return _("got {got}, expected {want}").format(got=a, want=e)


def _difference(name: str, actual: Any, expected: Tensor, rtol: float, atol: float,
                ignore: Tensor | None = None) -> tuple[str, str] | None:
    """None when ``actual`` matches ``expected``, else (kind, message): kind is "type", "dtype", "shape",
    "nonfinite" or "values"."""
    if type(actual) is not Tensor:
        return "type", _("{name}: expected a torch.Tensor, got {type}").format(name=name, type=type(actual).__name__)
    if actual.dtype != expected.dtype:
        return "dtype", _("{name}: dtype {got}, expected {want} (keep the dtype of the inputs; do not create tensors "
                          "with a default dtype)").format(name=name, got=actual.dtype, want=expected.dtype)
    if tuple(actual.shape) != tuple(expected.shape):
        return "shape", _("{name}: shape {got}, expected {want}").format(
            name=name, got=_fmt_shape(actual.shape), want=_fmt_shape(expected.shape))
    a = actual.detach().to("cpu")
    e = expected.detach()
    bad = ~torch.isfinite(a) & torch.isfinite(e) if e.is_floating_point() else None
    if bad is not None and bool(bad.any()):
        n_nan = int(torch.isnan(a).sum())
        first = _index(int(bad.flatten().nonzero()[0]), tuple(a.shape))
        kind = "NaN" if n_nan else "inf"
        return "nonfinite", _("{name}: {count} {kind} value(s) where the reference is finite, first at index "
                              "{first}").format(name=name, count=int(bad.sum()), kind=kind, first=first)
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
    largest = float(diff.flatten()[worst])
    relative = (diff / e.double().abs().clamp(min=1e-30)).masked_fill(close, 0.0)
    pair = _fmt_pair(float(a.flatten()[worst]), float(e.flatten()[worst]))
    if e.is_floating_point() and float(relative.max()) < ROUNDING:
        level = 10.0 ** math.floor(math.log10(largest))
        return "values", _("{name}: values differ at {count} of {positions} positions, all at the {level} level "
                           "(largest at index {where}: {pair}): computed in float32, or a different order of "
                           "operations?").format(name=name, count=int((~close).sum()), positions=int(graded.sum()),
                                                 level=f"{level:.0e}", where=where, pair=pair)
    return "values", _("{name}: values differ at {count} of {positions} positions; largest difference {largest} at "
                       "index {where} ({pair})").format(name=name, count=int((~close).sum()), positions=int(graded.sum()),
                                                        largest=f"{largest:.3g}", where=where, pair=pair)


ROUNDING = 1e-5  # a relative difference below this, everywhere, is rounding (float32 keeps about 7 digits)


def compare_one(name: str, actual: Any, expected: Tensor, rtol: float, atol: float,
                ignore: Tensor | None = None) -> str | None:
    """Return None when ``actual`` matches ``expected``, else a message saying what differs."""
    found = _difference(name, actual, expected, rtol, atol, ignore)
    return None if found is None else found[1]


def _compare(actual: Any, expected: Outputs, rtol: float, atol: float,
             ignore: dict[str, Tensor] | None = None) -> tuple[str, str] | None:
    """("<kind> <output>", message) of the first output that differs; None when they all match."""
    if not isinstance(actual, dict):
        return "type", _("the probe returned {type}, expected a dict of tensors").format(type=type(actual).__name__)
    missing = sorted(set(expected) - set(actual))
    if missing:
        return "missing", _("missing result(s): {names}").format(names=", ".join(missing))
    for key in expected:
        found = _difference(key, actual[key], expected[key], rtol, atol, (ignore or {}).get(key))
        if found:
            return f"{found[0]} {key}", found[1]  # the kind, then the output it is about
    return None


def compare(actual: Any, expected: Outputs, rtol: float, atol: float,
            ignore: dict[str, Tensor] | None = None) -> str | None:
    """Compare a probe's outputs with the expected ones; None when they match."""
    found = _compare(actual, expected, rtol, atol, ignore)
    return None if found is None else found[1]


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


def broken_properties(case: Case, outputs: Any, inputs: dict[str, Tensor]) -> dict[str, str]:
    """The case's relation on ``outputs``: {property: message} for each that fails; {} when none fails, when the
    case has no relation, or when an output is missing or not a tensor (``compare`` says so)."""
    if case.relation is None or not isinstance(outputs, dict) or any(type(v) is not Tensor for v in outputs.values()):
        return {}
    try:
        return dict(case.relation({k: v.detach() for k, v in outputs.items()}, inputs))
    except Exception as exc:  # noqa: BLE001 - outputs of the wrong shape: the comparison names it
        return {"unchecked": _("the outputs could not be checked against each other ({type})").format(
            type=type(exc).__name__)}


def _raised_by_a_stub(exc: NotImplementedError) -> bool:
    """True when the innermost frame is a ``raise NotImplementedError`` statement (a stub's, or one the learner
    wrote); False when PyTorch raised it (a C++ kernel has no frame of its own: the innermost line is a call)."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return True
    in_torch = "torch" in Path(frames[-1].filename).parts  # nn.Module's own "missing forward" raise
    return not in_torch and (frames[-1].line or "").lstrip().startswith("raise NotImplementedError")


def _describe_exception(exc: BaseException, tr: Callable[[str], str] = _) -> str:
    """What ``exc`` says to the learner, in the current language (``tr``; the spec's ``RAISES`` patterns match the
    English, ``tr=str``)."""
    if isinstance(exc, NotImplementedError) and _raised_by_a_stub(exc):
        return tr("not implemented yet: {detail}").format(detail=exc) if str(exc) else tr("not implemented yet")
    if isinstance(exc, CheckFailure):
        return exc.shown() if tr is _ else str(exc)
    if isinstance(exc, ModuleNotFoundError) and (exc.name or "").startswith("course_lib."):
        return tr("{file} is missing: restore it (git checkout) and implement it").format(
            file=exc.name.replace(".", "/") + ".py")
    if isinstance(exc, SyntaxError):
        return tr("cannot import {file}: SyntaxError at line {line}: {detail}").format(
            file=Path(exc.filename or "?").name, line=exc.lineno, detail=exc.msg)
    if isinstance(exc, SystemExit):
        return tr("called sys.exit({code}) (or exit()): a library function must return, not exit").format(
            code=repr(exc.code))
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "course_lib" in f.filename
              and "provided" not in f.filename]
    # the place stays as Python writes it, in every language: a spec's RAISES pattern may name the line
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno}: {frames[-1].line})" if frames else ""
    return tr("raised {type}: {detail}").format(type=type(exc).__name__, detail=exc) + where


def raised_mistakes(description: str, raises: Mapping[str, str] | None) -> list[str]:
    """Names of the known mistakes whose pattern (the spec's ``RAISES``) matches an exception's description."""
    return [name for name, pattern in (raises or {}).items() if re.search(pattern, description)]


def judge(chapter: str, case: Case, actual: Outputs | BaseException, inputs: dict[str, Tensor],
          expected: Outputs, mistakes: dict[str, Outputs], mistake_messages: dict[str, str],
          raises: Mapping[str, str] | None = None) -> Result:
    """Turn a probe's outputs (or the exception it raised) into a scored, explained result.

    ``raises`` is the spec's ``RAISES``: {mistake: regex} naming the mistakes recognised by what they raise.
    """
    def fail(message: str, names: list[str] | None = None) -> Result:
        return Result(chapter, case.name, case.points, 0.0, "fail", message, names or [])

    def known(names: list[str], message: str) -> Result:
        return fail(f"{_(N_(' Or: ')).join(_(mistake_messages[n]) for n in names)} [{message}]", names)

    if isinstance(actual, BaseException):
        message = _describe_exception(actual)
        names = raised_mistakes(_describe_exception(actual, str), raises)
        if names:
            return known(names, message)
        return fail(f"{message}. {_(case.hint_if_raises)}" if case.hint_if_raises else message)
    ignore = case.ignore(inputs) if case.ignore else None
    graded = {k: v for k, v in expected.items() if k not in case.free}
    kind, message = _compare(actual, graded, case.rtol, case.atol, ignore) or ("", None)
    untyped = [k for k in case.free if isinstance(actual, dict) and type(actual.get(k)) is not Tensor]
    if message is None and untyped:
        kind, message = "type", _("{name}: expected a torch.Tensor, got {type}").format(
            name=untyped[0], type=type(actual.get(untyped[0])).__name__)
    broken = broken_properties(case, actual, inputs)
    if message is not None and "unchecked" in broken:
        broken = {}  # the comparison already says what is wrong with the outputs
    if message is None and not broken:
        return Result(chapter, case.name, case.points, case.points, "pass")
    message = "; ".join([*broken.values(), *([message] if message else [])])
    names = matching_mistakes(actual, mistakes, expected, case.rtol, case.atol)
    if not names and broken and "unchecked" not in broken:  # else: the known mistakes breaking the same properties
        names = [n for n, wrong in mistakes.items() if set(broken_properties(case, wrong, inputs)) == set(broken)]
    if names:
        return known(names, message)
    hinted = case.hint and (not case.hint_on or set(case.hint_on) & {*kind.split(" ", 1), *broken})
    return fail(f"{message}. {_(case.hint)}".strip() if hinted else message)


def run_probe(probes: dict[str, Probe], case: Case, impl: Any, inputs: dict[str, Tensor]) -> Outputs | BaseException:
    """Run one probe on copies of the inputs; an exception is returned, not raised.

    A ready-made case runs nothing here (its probe returns no outputs): ``judge_source`` decides it.
    """
    if case.probe == SOURCE_PROBE:
        return {}
    try:
        return probes[case.probe](impl, clone_inputs(inputs))
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - learner code may raise anything, SystemExit included
        return exc


def total(results: list[Result]) -> tuple[float, float]:
    return (math.fsum(r.earned for r in results), math.fsum(r.points for r in results))
