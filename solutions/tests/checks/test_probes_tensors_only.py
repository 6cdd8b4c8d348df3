"""Points are decided where the comparison is made, never where learner code runs (issue 17, point 3).

A probe runs in the grading child beside the learner's code, which may have replaced anything in torch
(``torch.allclose = lambda *a, **k: True`` in any module of the run). So a probe only calls the learner's
code and returns what it gave, a dict of plain tensors; every comparison, the relations between outputs
included (``Case.relation``), runs in the parent. These tests hold every probe of every chapter, public and
hidden cases, to that: the reference's outputs are plain tensors, no probe (or spec helper it calls)
compares values outside a guard that can only fail the case, and a case of a probe with a relation has it
in the hidden cases too.
"""
from __future__ import annotations

import ast
import csv
import inspect
import textwrap
from types import FunctionType, ModuleType

import pytest
import torch

from course_lib.provided import chapters
from course_lib.provided.checking import run_probe
from course_lib.provided.layout import LAYOUT, modules_for
from course_lib.provided.loader import load_impl

from course_admin.grading.plan import hidden_cases

from .. import course_cli

pytestmark = [pytest.mark.grading]

CHAPTERS = chapters.available()
# calls that compare values; comparison operators are found as ast.Compare (``is`` and ``in`` are allowed:
# identity and membership cannot be replaced by learner code, and decide only what the learner wrote)
COMPARING_CALLS = {"allclose", "equal", "isclose", "eq", "ne", "gt", "ge", "lt", "le", "all", "any", "item",
                   "amax", "amin", "assert_close"}
COMPARING_OPS = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def all_cases(number: str) -> list:
    return [*chapters.load_spec(number).CASES, *hidden_cases(number)]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_probe_returns_a_dict_of_plain_tensors(chapter: str) -> None:
    spec, ref = chapters.load_spec(chapter), load_impl("reference")
    for case in all_cases(chapter):
        if case.reads_source:
            continue
        torch.manual_seed(0)
        out = run_probe(spec.PROBES, case, ref, case.make_inputs(case.seed))
        assert isinstance(out, dict) and out, (case.name, out)
        bad = {k: type(v).__name__ for k, v in out.items() if type(v) is not torch.Tensor}
        assert not bad, f"ch{chapter} {case.name}: not plain tensors: {bad}"


# ---------------------------------------------------------------- what the probes compute in the child
def _spec_function(obj: object) -> bool:
    return isinstance(obj, FunctionType) and obj.__module__.startswith("course_spec_")


def _referenced(fn: FunctionType) -> list[FunctionType]:
    """Spec functions (and methods of spec classes) that ``fn`` names: ``name`` or ``other_spec.name``."""
    found = []
    for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(fn)))):
        obj = None
        if isinstance(node, ast.Name):
            obj = fn.__globals__.get(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            base = fn.__globals__.get(node.value.id)
            if isinstance(base, ModuleType) and base.__name__.startswith("course_spec_"):
                obj = getattr(base, node.attr, None)
        if isinstance(obj, type) and obj.__module__.startswith("course_spec_"):
            found += [m for m in vars(obj).values() if _spec_function(m)]
        elif _spec_function(obj):
            found.append(obj)
    return found


def run_in_the_child(spec: ModuleType) -> list[FunctionType]:
    """Every spec function a probe of ``spec`` calls, directly or not (other chapters' specs included)."""
    todo, seen = list(spec.PROBES.values()), []
    while todo:
        fn = todo.pop()
        if fn not in seen:
            seen.append(fn)
            todo += _referenced(fn)
    return seen


def _guards(tree: ast.AST) -> set[int]:
    """ids of the nodes inside an ``if`` whose body ends by raising (and has no else): it can only fail a case."""
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and not node.orelse and isinstance(node.body[-1], ast.Raise):
            inside.update(id(n) for n in ast.walk(node))
    return inside


def comparisons(source: str, name: str) -> list[str]:
    """The value comparisons of a function's ``source`` outside raise guards, as "name line N: code"."""
    source = textwrap.dedent(source)
    tree = ast.parse(source)
    guarded = _guards(tree)
    found = []
    for node in ast.walk(tree):
        if id(node) in guarded:
            continue
        func = node.func if isinstance(node, ast.Call) else None
        called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if called in COMPARING_CALLS or (isinstance(node, ast.Compare)
                                         and any(isinstance(op, COMPARING_OPS) for op in node.ops)):
            found.append(f"{name} line {node.lineno}: {ast.get_source_segment(source, node)}")
    return found


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_probe_compares_values(chapter: str) -> None:
    spec = chapters.load_spec(chapter)
    functions = run_in_the_child(spec)
    assert set(spec.PROBES.values()) <= set(functions)
    found = [c for fn in functions for c in comparisons(inspect.getsource(fn), fn.__qualname__)]
    assert not found, f"ch{chapter}: probes compare beside learner code (return the tensors instead): {found}"


OLD_DROPOUT_PROBE = '''
def dropout(impl, inputs):
    x, p = inputs["x"], 0.5
    module = encoding(impl, x.size(-1), int(inputs["max_len"]), dropout=p)
    clean, noisy = module.eval()(x), module.train()(x)
    if not isinstance(noisy, Tensor) or noisy.shape != clean.shape:
        raise CheckFailure("in training mode the output must be a tensor of the input's shape")
    kept = noisy != 0
    return {"some_elements_zeroed": (~kept).any(),
            "kept_ones_are_(x+pe)/(1-p)": torch.tensor(torch.allclose(noisy[kept], clean[kept] / (1 - p)))}
'''


def test_the_scan_finds_what_the_old_dropout_probe_compared() -> None:
    """Chapter 04's dropout probe before issue 17: every comparison is found, the raise guard is not."""
    found = [c.split(": ", 1)[1] for c in comparisons(OLD_DROPOUT_PROBE, "dropout")]
    assert sorted(found) == sorted(["noisy != 0", "(~kept).any()",
                                    "torch.allclose(noisy[kept], clean[kept] / (1 - p))"]), found


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_probes_relation_is_on_every_case_of_that_probe(chapter: str) -> None:
    """A hidden case built from a spec's input maker must carry the relation of its probe (``**spec.DROPOUT``)."""
    by_probe: dict[str, set] = {}
    for case in all_cases(chapter):
        by_probe.setdefault(case.probe, set()).add((case.relation, case.free))
    mixed = {probe: kinds for probe, kinds in by_probe.items() if len(kinds) > 1}
    assert not mixed, f"ch{chapter}: cases of one probe judged differently: {mixed}"


# ---------------------------------------------------------------- planted: comparisons replaced by learner code
# A learner's earlier chapter (attention.py, under every later chapter) and its chapter 04 module replace
# torch's comparisons, on top of code wrong exactly where the property cases look. Graded through `course
# grade`, it earns what the same wrong code earns without the replacement: no comparison runs beside it.
PATCH = '''import torch as _torch
_torch.allclose = lambda *a, **k: True
_torch.equal = lambda *a, **k: True
_torch.isclose = lambda a, b, *r, **k: _torch.ones_like(a, dtype=_torch.bool)
_torch.Tensor.__eq__ = lambda self, other: _torch.ones_like(self, dtype=_torch.bool)
'''
FUTURE = "from __future__ import annotations\n"
GRADED = ("04", "08")


def _reference(module: str) -> str:
    return (LAYOUT.reference / module).read_text(encoding="utf-8")


def _sub(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def _line(module: str, start: str) -> str:
    """The reference's whole line of ``module`` that starts (after its indentation) with ``start``."""
    return next(line for line in _reference(module).splitlines() if line.strip().startswith(start))


def wrong_files() -> dict[str, str]:
    """The reference, but dropout applied to x alone (chapter 04) and no padding mask in encode (chapter 08)."""
    files = {m: _reference(m) for m in sorted({*modules_for("04"), *modules_for("08")})}
    add, drop = _line("positional.py", "x = x + self.pe"), _line("positional.py", "return self.dropout(x)")
    pe = add.split("x + ", 1)[1].split("#")[0].strip()  # the table's rows, in x's dtype
    files["positional.py"] = _sub(_sub(files["positional.py"], add + "\n", ""), drop, f"{drop} + {pe}")
    masked = _line("classifier.py", "return self.encoder(x, mask=")
    files["classifier.py"] = _sub(files["classifier.py"], masked, masked.split("return")[0] + "return self.encoder(x)")
    return files


CONSTANT = '''

_Reference = TransformerClassifier


class TransformerClassifier(_Reference):  # planted: every member, but no encoder run and constant logits
    def encode(self, tokens, mask=None):
        return self.positional(self.embed(tokens))  # (batch, seq, d_model) no encoder

    def forward(self, tokens, mask=None):
        return self.head.bias.expand(tokens.size(0), -1)  # (batch, num_classes) the same for every review
'''


def planted_learners() -> dict[str, dict[str, str]]:
    wrong = wrong_files()
    patched = {m: _sub(text, FUTURE, FUTURE + PATCH) if m in ("attention.py", "positional.py") else text
               for m, text in wrong.items()}
    constant = {m: _reference(m) for m in wrong}
    constant["classifier.py"] += CONSTANT
    return {"wrong": wrong, "wrong_patched": patched, "constant": constant}


def labels(number: str) -> list[tuple[str, str]]:
    """(label in grades.csv, probe) of every case of a chapter, public then hidden, as the grader names them."""
    public = [(c.name, c.probe) for c in chapters.load_spec(number).CASES]
    return public + [(f"hidden case {k}", c.probe) for k, c in enumerate(hidden_cases(number), start=1)]


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], dict[str, float]]:
    """{(learner, chapter): {case label: points}} from one `course grade` run over the planted learners."""
    subs = tmp_path_factory.mktemp("subs")
    for name, files in planted_learners().items():
        for module, text in files.items():
            (subs / name / "course_lib" / module).parent.mkdir(parents=True, exist_ok=True)
            (subs / name / "course_lib" / module).write_text(text, encoding="utf-8")
    out = subs.parent / "out"
    proc = course_cli.run(["grade", str(subs), "--out", str(out),
                           "--chapters", *GRADED, "--no-notebooks", "--timeout", "120", "--memory", "1536",
                           "--trust-learners", "--jobs", "2", "--quiet"],
                          cwd=LAYOUT.root, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(out / "grades.csv", newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["kind"] == "course_lib"]
    table: dict[tuple[str, str], dict[str, float]] = {}
    for r in rows:
        table.setdefault((r["learner"], r["chapter"]), {})[r["component"]] = float(r["points"])
    return table


PROPERTY_PROBES = {"04": {"dropout"}, "08": {"attention_ignores_padding", "padding_invariance"}}


@pytest.mark.parametrize("chapter", GRADED)
def test_replacing_torch_comparisons_gains_nothing(graded, chapter: str) -> None:
    wrong, patched = graded[("wrong", chapter)], graded[("wrong_patched", chapter)]
    assert [label for label, _ in labels(chapter)] == list(wrong), "the grader's cases, in order"
    assert patched == wrong, {k: (wrong[k], patched[k]) for k in wrong if patched[k] != wrong[k]}
    lost = [label for label, probe in labels(chapter) if probe in PROPERTY_PROBES[chapter]]
    assert lost and all(wrong[label] == 0 for label in lost), wrong


def test_constant_logits_earn_no_property_case(graded) -> None:
    """Issue 17, point 5: a classifier with every member but constant logits and no encoder run (it earned 4.5)."""
    scores = graded[("constant", "08")]
    cases = [label for label, probe in labels("08") if probe in PROPERTY_PROBES["08"]]
    assert len(cases) == 5 and all(scores[label] == 0 for label in cases), scores
