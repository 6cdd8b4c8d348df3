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
* A *ready-made* case (``ready_made_case``, declared from the spec's ``READY_MADE = {module file:
  [PyTorch names]}``) is decided by reading the learner's source, never by running it: a static scan
  (``ast``) of the chapter's own modules for uses of PyTorch's ready-made counterpart of the chapter's
  component (``torch.nn.functional.scaled_dot_product_attention`` in chapter 02). `course check` scans
  the files it imports; the grader scans the submitted bytes in its own process, outside the sandbox.
  It earns its points when nothing is found and at least one other public case passes (a stub is not
  "built from scratch" yet). The scan follows imports, aliases (``import torch.nn.functional as F``,
  ``nn = torch.nn``) and ``getattr(module, "name")``; it does not try to defeat deliberate hiding.
"""
from __future__ import annotations

import ast
import math
import re
import traceback
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Callable

import torch
from torch import Tensor

Outputs = dict[str, Tensor]
Probe = Callable[[Any, dict[str, Tensor]], Outputs]
Relation = Callable[[Outputs, dict[str, Tensor]], dict[str, str]]  # (outputs, inputs) -> {property: message}
SOURCE_PROBE = "(source scan)"  # the probe of a ready-made case: nothing runs, the learner's source is read


class CheckFailure(Exception):
    """Raised by a probe or a judge with a message for the learner."""


@dataclass(frozen=True)
class Case:
    """One graded check of a chapter.

    make_inputs(seed) is deterministic; ``ignore(inputs)`` may give, per output key, a bool tensor of
    positions not graded (still required finite). ``hint`` follows a wrong value no known mistake explains,
    ``hint_if_raises`` an exception no ``RAISES`` pattern names. ``ready_made``: only on a ready-made case.
    ``relation(outputs, inputs)``: {property: message} for each property between the outputs that fails
    ({} when all hold); the outputs named in ``free`` are judged by it alone (not compared with the reference).
    """

    name: str
    points: float
    probe: str
    make_inputs: Callable[[int], dict[str, Tensor]]
    seed: int = 0
    about: str = ""
    hint: str = ""
    hint_if_raises: str = ""
    rtol: float = 1e-4
    atol: float = 1e-5
    ignore: Callable[[dict[str, Tensor]], dict[str, Tensor]] | None = None
    ready_made: tuple[tuple[str, tuple[str, ...]], ...] = ()
    relation: Relation | None = None
    free: tuple[str, ...] = ()

    @property
    def reads_source(self) -> bool:
        """True for a ready-made case: judged by ``judge_source`` on the learner's source, not by a probe."""
        return self.probe == SOURCE_PROBE


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


def broken_properties(case: Case, outputs: Any, inputs: dict[str, Tensor]) -> dict[str, str]:
    """The case's relation on ``outputs``: {property: message} for each that fails; {} when none fails, when the
    case has no relation, or when an output is missing or not a tensor (``compare`` says so)."""
    if case.relation is None or not isinstance(outputs, dict) or any(type(v) is not Tensor for v in outputs.values()):
        return {}
    try:
        return dict(case.relation({k: v.detach() for k, v in outputs.items()}, inputs))
    except Exception as exc:  # noqa: BLE001 - outputs of the wrong shape: the comparison names it
        return {"unchecked": f"the outputs could not be checked against each other ({type(exc).__name__})"}


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
        return fail(f"{' Or: '.join(mistake_messages[n] for n in names)} [{message}]", names)

    if isinstance(actual, BaseException):
        message = _describe_exception(actual)
        names = raised_mistakes(message, raises)
        if names:
            return known(names, message)
        return fail(f"{message}. {case.hint_if_raises}" if case.hint_if_raises else message)
    ignore = case.ignore(inputs) if case.ignore else None
    graded = {k: v for k, v in expected.items() if k not in case.free}
    message = compare(actual, graded, case.rtol, case.atol, ignore)
    untyped = [k for k in case.free if isinstance(actual, dict) and type(actual.get(k)) is not Tensor]
    if message is None and untyped:
        message = f"{untyped[0]}: expected a torch.Tensor, got {type(actual.get(untyped[0])).__name__}"
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
    return fail(f"{message}. {case.hint}".strip() if case.hint else message)


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


# ---------------------------------------------------------------- ready-made cases: a scan of the source
def _no_inputs(seed: int) -> dict[str, Tensor]:
    return {}


def ready_made_case(modules: Mapping[str, Sequence[str]], points: float, name: str = "built from scratch",
                    about: str = "") -> Case:
    """The case of a spec's ``READY_MADE`` = {module file: patterns of PyTorch names (fnmatch, e.g.
    "Transformer*")}: full points when those modules use none of them (and another public case passes)."""
    pairs = tuple((module, tuple(patterns)) for module, patterns in modules.items())
    listed = ", ".join(sorted({p for _, patterns in pairs for p in patterns}))
    return Case(name, points, SOURCE_PROBE, _no_inputs, about=about or f"no PyTorch ready-made {listed}",
                ready_made=pairs)


def _is_torch(module: str | None) -> bool:
    return module is not None and (module == "torch" or module.startswith("torch."))


def _dotted(node: ast.AST, aliases: Mapping[str, str]) -> str | None:
    """``F.scaled_dot_product_attention`` -> "torch.nn.functional.scaled_dot_product_attention", when
    the chain starts at a name bound to a torch module (``aliases``); None otherwise."""
    attrs = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in aliases:
        return ".".join([aliases[node.id], *reversed(attrs)])
    return None


def _torch_aliases(tree: ast.AST) -> dict[str, str]:
    """Every name the module binds to something in torch: imports, then plain assignments (``nn = torch.nn``)."""
    aliases: dict[str, str] = {}
    for _ in range(3):  # an assignment may use an alias bound by another one
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if _is_torch(a.name):
                        aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and not node.level and _is_torch(node.module):
                aliases.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names if a.name != "*"})
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                target = _dotted(node.value, aliases)
                if target:
                    aliases[node.targets[0].id] = target
    return aliases


def _names_used(node: ast.AST, aliases: Mapping[str, str]) -> Iterator[str]:
    """The torch names one node refers to: what it imports, its dotted name, or getattr(torch thing, "name")."""
    if isinstance(node, ast.Import):
        yield from (a.name for a in node.names if _is_torch(a.name))
    elif isinstance(node, ast.ImportFrom) and not node.level and _is_torch(node.module):
        yield from (f"{node.module}.{a.name}" for a in node.names)
    elif isinstance(node, (ast.Name, ast.Attribute)):
        dotted = _dotted(node, aliases)
        if dotted:
            yield dotted
    elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
          and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
        base = _dotted(node.args[0], aliases)
        if base:
            yield f"{base}.{node.args[1].value}"


def _first_match(dotted: str, patterns: Sequence[str]) -> str | None:
    """The dotted name up to its first part (after ``torch``) that matches a pattern, else None."""
    parts = dotted.split(".")
    for i in range(1, len(parts)):
        if any(fnmatchcase(parts[i], p) for p in patterns):
            return ".".join(parts[: i + 1])
    return None


def ready_made_uses(source: str | bytes, patterns: Sequence[str]) -> list[str]:
    """The PyTorch names matching ``patterns`` that ``source`` uses, e.g. ["torch.nn.functional.x (line 12)"].

    Raises SyntaxError (or RecursionError, ValueError) when ``source`` is not readable Python.
    """
    tree = ast.parse(source)
    aliases = _torch_aliases(tree)
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        for dotted in _names_used(node, aliases):
            hit = _first_match(dotted, patterns)
            if hit:
                line = getattr(node, "lineno", 0)
                found[hit] = min(found.get(hit, line), line)
    return [f"{name} (line {line})" for name, line in sorted(found.items(), key=lambda kv: (kv[1], kv[0]))]


def judge_source(chapter: str, case: Case, sources: Mapping[str, str | bytes | None], others: Sequence[Any]) -> Result:
    """Score a ready-made case from the sources of its modules ({file: text, None when absent}) and the
    results of the chapter's other public cases (anything with ``.status`` and ``.message``)."""
    def fail(message: str) -> Result:
        return Result(chapter, case.name, case.points, 0.0, "fail", message)

    uses = []
    for module, patterns in case.ready_made:
        text = sources.get(module)
        if text is None:
            return fail(f"course_lib/{module} is missing, so it cannot be read")
        try:
            uses += [f"{use} in {module}" for use in ready_made_uses(text, patterns)]
        except Exception as exc:  # noqa: BLE001 - SyntaxError, RecursionError, a NUL byte: not readable Python
            return fail(f"cannot read course_lib/{module} as Python ({type(exc).__name__}): fix it first")
    if uses:
        return fail(f"uses PyTorch's ready-made {'; '.join(uses)}. This chapter's component must be built from "
                    "scratch with tensor operations (@, +, torch.tanh, torch.softmax, …) and the earlier chapters' "
                    "modules, so this check earns no points; the other checks still grade what your code returns.")
    if not any(r.status == "pass" for r in others):
        if others and all(r.message.startswith("not implemented yet") for r in others):
            return fail("not implemented yet")
        return fail("no other check of this chapter passes yet: this one counts once your code works")
    return Result(chapter, case.name, case.points, case.points, "pass")
