"""Mutation testing of the reference: how many plausible wrong versions of it the checks catch (issue 18).

Cosmic Ray's mutation operators (the ``cosmic-ray`` package, its ``core`` operators) make every small change
to a chapter's reference modules (``solutions/course_ref/<module>.py``, the chapter's ``MODULES``): ``+`` for
``-``, ``1`` for ``2``, ``<`` for ``<=``, ``True`` for ``False``, a decorator removed, a loop that never runs,
and so on. Each mutant is graded in this process by the chapter's public cases, then by its hidden cases,
exactly as the grader judges them (``checking.judge`` against the reference's outputs, inputs made under
``torch.manual_seed(0)``): *killed by public* when a public case fails, *killed by hidden* when only a hidden
one does, *survived* otherwise. Cosmic Ray's own ``exec`` runs a test command per mutant in a new process
(seconds of ``import torch`` each); here a mutant is a fresh in-memory copy of the reference package
(``course_mut``), so a chapter takes a minute or two on 2 cores.

A survivor is either killed by a new case or listed as *equivalent* (it computes what the reference computes
on every input the contract allows) with a one-line reason in ``solutions/hidden/chNN_equivalent.py``
(``EQUIVALENT = {mutant id: reason}``; under solutions/ because a mutant's id points into the reference).
Mutants inside annotations are not made: with ``from __future__ import annotations`` they are never run.

    .venv/bin/python solutions/scripts/mutation_score.py                 # the table, every chapter
    .venv/bin/python solutions/scripts/mutation_score.py 02 05 --show    # two chapters, survivors' diffs
"""
from __future__ import annotations

import argparse
import ast
import difflib
import importlib.abc
import importlib.util
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import cosmic_ray.plugins as plugins
import torch
from cosmic_ray.ast import ast_nodes, get_ast
from cosmic_ray.mutating import mutate_code

from course_lib.provided import chapters
from course_lib.provided.checking import judge, run_probe
from course_lib.provided.layout import LAYOUT, chapter_facts
from course_lib.provided.loader import Impl, load_file, load_impl

from ..grading.plan import hidden_cases

PACKAGE = "course_mut"     # the mutated copy of course_ref, rebuilt for every mutant
TIME_LIMIT = 30            # seconds a mutant may take (a mutant can make a loop run long): then it is killed


@dataclass(frozen=True)
class Mutant:
    id: str          # "attention.py:ReplaceBinaryOperator_Div_Mul#0": module, operator, occurrence
    module: str
    line: int
    source: str      # the whole mutated module

    def diff(self, original: str) -> str:
        lines = difflib.unified_diff(original.splitlines(), self.source.splitlines(), lineterm="", n=0)
        return "\n".join(line for line in lines if line[:1] in "+-" and line[:3] not in ("+++", "---"))


# ---------------------------------------------------------------- the mutants (Cosmic Ray's operators)
def _operators() -> list[tuple[str, Any]]:
    """Every core operator that takes no argument (VariableReplacer and VariableInserter need one)."""
    out = []
    for name in plugins.operator_names():
        try:
            out.append((name.split("/", 1)[1], plugins.get_operator(name)()))
        except TypeError:
            continue
    return out


def _annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(start, end) (line, column) of every annotation: never evaluated under ``from __future__ import annotations``."""
    spans = []
    for node in ast.walk(ast.parse(source)):
        note = None
        if isinstance(node, ast.arg):
            note = node.annotation
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            note = node.returns
        elif isinstance(node, ast.AnnAssign):
            note = node.annotation
        if note is not None:
            spans.append(((note.lineno, note.col_offset), (note.end_lineno, note.end_col_offset)))
    return spans


def mutants(module: str) -> list[Mutant]:
    """Every mutant of the reference module ``module`` ("attention.py"), outside annotations."""
    source = (LAYOUT.reference / module).read_text(encoding="utf-8")
    nodes = list(ast_nodes(get_ast(source)))
    spans = _annotation_spans(source)
    out = []
    for name, operator in _operators():
        occurrence = 0
        for node in nodes:
            for start, _ in operator.mutation_positions(node):
                if not any(a <= start < b for a, b in spans):
                    mutated = mutate_code(source, operator, occurrence)
                    if mutated is not None and mutated != source:
                        out.append(Mutant(f"{module}:{name}#{occurrence}", module, start[0], mutated))
                occurrence += 1
    return out


# ---------------------------------------------------------------- a mutated reference, in memory
class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves ``course_mut.<name>`` from the reference's sources, one of them replaced by a mutant."""

    def __init__(self) -> None:
        self.sources: dict[str, str] = {}

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname == PACKAGE:
            return importlib.util.spec_from_loader(fullname, self, is_package=True)
        if fullname.startswith(PACKAGE + ".") and fullname.split(".", 1)[1] in self.sources:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        if module.__name__ == PACKAGE:
            module.__path__ = []
            return
        name = module.__name__.split(".", 1)[1]
        exec(compile(self.sources[name], f"<mutant {name}.py>", "exec"), module.__dict__)  # noqa: S102

    def use(self, mutant: Mutant | None) -> Impl:
        """The reference with ``mutant`` in place (None: unmutated), fresh: nothing of the last one is kept."""
        for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
            del sys.modules[name]
        self.sources = {p.stem: p.read_text(encoding="utf-8") for p in LAYOUT.reference_modules()}
        if mutant is not None:
            self.sources[Path(mutant.module).stem] = mutant.source
        return Impl(PACKAGE, "mutant")


FINDER = _Finder()
sys.meta_path.insert(0, FINDER)


# ---------------------------------------------------------------- grading a mutant
@dataclass
class Graded:
    case: Any
    hidden: bool
    inputs: dict[str, torch.Tensor]
    expected: dict[str, torch.Tensor]


def graded_cases(number: str) -> list[Graded]:
    """The chapter's cases, public then hidden, with the reference's outputs (the grader's way: seed 0)."""
    spec, ref = chapters.load_spec(number), load_impl("reference")
    out = []
    for hidden, cases in ((False, spec.CASES), (True, hidden_cases(number))):
        for case in cases:
            if case.reads_source:
                continue
            torch.manual_seed(0)
            inputs = case.make_inputs(case.seed)
            expected = run_probe(spec.PROBES, case, ref, inputs)
            if isinstance(expected, BaseException):
                raise RuntimeError(f"the reference fails ch{number} {case.name!r}") from expected
            out.append(Graded(case, hidden, inputs, {k: v.detach() for k, v in expected.items()}))
    return out


class _TooLong(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _TooLong()


def verdict(number: str, graded: list[Graded], impl: Any) -> str:
    """"public" or "hidden" (the first kind of case that fails), or "survived"."""
    spec = chapters.load_spec(number)
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIME_LIMIT)
    try:
        for g in graded:
            torch.manual_seed(0)
            actual = run_probe(spec.PROBES, g.case, impl, g.inputs)
            if isinstance(actual, _TooLong):
                return "hidden" if g.hidden else "public"
            if judge(number, g.case, actual, g.inputs, g.expected, {}, {}).status != "pass":
                return "hidden" if g.hidden else "public"
    except _TooLong:
        return "public"  # counted as killed: the time limit of the grader stops it too
    finally:
        signal.alarm(0)
    return "survived"


def equivalent(number: str) -> dict[str, str]:
    """The chapter's survivors read and found equivalent: {mutant id: why}."""
    path = LAYOUT.hidden / f"ch{number}_equivalent.py"
    return dict(load_file(f"course_equivalent_ch{number}", path).EQUIVALENT) if path.is_file() else {}


@dataclass
class Score:
    chapter: str
    mutants: int
    public: int
    hidden: int
    survivors: list[Mutant]
    equivalent: dict[str, str]
    seconds: float

    @property
    def unexplained(self) -> list[Mutant]:
        return [m for m in self.survivors if m.id not in self.equivalent]

    @property
    def public_share(self) -> float:
        """Killed by public cases among the non-equivalent mutants."""
        real = self.mutants - (len(self.survivors) - len(self.unexplained))
        return self.public / real if real else 1.0


def score(number: str, only: list[str] | None = None) -> Score:
    """Grade every mutant of the chapter's modules (or the mutants whose ids are in ``only``)."""
    start = time.perf_counter()
    graded = graded_cases(number)
    if verdict(number, graded, FINDER.use(None)) != "survived":
        raise RuntimeError(f"ch{number}: the unmutated copy of the reference fails its own cases")
    counts = {"public": 0, "hidden": 0}
    survivors = []
    found = [m for module in chapter_facts(number).modules for m in mutants(module)]
    if only is not None:
        found = [m for m in found if m.id in only]
    for mutant in found:
        result = verdict(number, graded, FINDER.use(mutant))
        if result == "survived":
            survivors.append(mutant)
        else:
            counts[result] += 1
    FINDER.use(None)
    return Score(number, len(found), counts["public"], counts["hidden"], survivors, equivalent(number),
                 time.perf_counter() - start)


def table(scores: list[Score]) -> str:
    head = f"{'chapter':<8}{'mutants':>8}{'public':>8}{'hidden':>8}{'survived':>9}{'equiv.':>7}{'unexpl.':>8}" \
           f"{'public %':>9}{'seconds':>8}"
    lines = [head, "-" * len(head)]
    for s in scores:
        lines.append(f"{'ch' + s.chapter:<8}{s.mutants:>8}{s.public:>8}{s.hidden:>8}{len(s.survivors):>9}"
                     f"{len(s.survivors) - len(s.unexplained):>7}{len(s.unexplained):>8}"
                     f"{100 * s.public_share:>8.1f}%{s.seconds:>8.0f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="*", help="chapters (default: every chapter), e.g. 02 ch05")
    parser.add_argument("--show", action="store_true", help="print each survivor's change and, if listed, why")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    numbers = [chapters.normalise(c) for c in args.chapters] or chapters.available()
    scores = []
    for number in numbers:
        s = score(number)
        scores.append(s)
        if args.show:
            for m in s.survivors:
                original = (LAYOUT.reference / m.module).read_text(encoding="utf-8")
                why = s.equivalent.get(m.id, "NOT EXPLAINED: add a case that kills it, or list it as equivalent")
                print(f"ch{number} {m.id} (line {m.line}): {why}\n{m.diff(original)}\n")
        print(table([s]).splitlines()[-1], flush=True)
    print("\n" + table(scores))
    goal = all(not s.unexplained and s.public_share >= 0.9 for s in scores)
    print("\ngoal (every non-equivalent mutant killed, >= 90% by public cases): " + ("met" if goal else "NOT met"))
    return 0 if goal else 1


if __name__ == "__main__":
    sys.exit(main())
