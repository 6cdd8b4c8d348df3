"""Ready-made cases: a chapter's use of PyTorch's own counterpart of its component, found in the source.

A *ready-made* case (``ready_made_case``, declared from the spec's ``READY_MADE = {module file: [PyTorch
names]}``) is decided by reading the learner's source, never by running it: a static scan (``ast``) of the
chapter's own modules for uses of PyTorch's ready-made counterpart of the chapter's component
(``torch.nn.functional.scaled_dot_product_attention`` in chapter 02). `course check` scans the files it
imports; the grader scans the submitted bytes in its own process, outside the sandbox. It earns its points
when nothing is found and at least one other public case passes (a stub is not "built from scratch" yet).
The scan follows imports, aliases (``import torch.nn.functional as F``, ``nn = torch.nn``) and
``getattr(module, "name")``; it does not try to defeat deliberate hiding.
"""
from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any

from torch import Tensor

from .i18n import _
from .cases import SOURCE_PROBE, Case, Result


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
    for _round in range(3):  # an assignment may use an alias bound by another one
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
    return [_("{name} (line {line})").format(name=name, line=line)
            for name, line in sorted(found.items(), key=lambda kv: (kv[1], kv[0]))]


def judge_source(chapter: str, case: Case, sources: Mapping[str, str | bytes | None], others: Sequence[Any]) -> Result:
    """Score a ready-made case from the sources of its modules ({file: text, None when absent}) and the
    results of the chapter's other public cases (anything with ``.status`` and ``.message``)."""
    def fail(message: str) -> Result:
        return Result(chapter, case.name, case.points, 0.0, "fail", message)

    uses = []
    for module, patterns in case.ready_made:
        text = sources.get(module)
        if text is None:
            return fail(_("course_lib/{module} is missing, so it cannot be read").format(module=module))
        try:
            uses += [_("{use} in {module}").format(use=use, module=module) for use in ready_made_uses(text, patterns)]
        except Exception as exc:  # noqa: BLE001 - SyntaxError, RecursionError, a NUL byte: not readable Python
            return fail(_("cannot read course_lib/{module} as Python ({type}): fix it first").format(
                module=module, type=type(exc).__name__))
    if uses:
        return fail(_("uses PyTorch's ready-made {uses}. This chapter's component must be built from scratch with "
                      "tensor operations (@, +, torch.tanh, torch.softmax, …) and the earlier chapters' modules, so this "
                      "check earns no points; the other checks still grade what your code returns.").format(
                          uses="; ".join(uses)))
    if not any(r.status == "pass" for r in others):
        if others and all(r.message.startswith(("not implemented yet", _("not implemented yet"))) for r in others):
            return fail(_("not implemented yet"))
        return fail(_("no other check of this chapter passes yet: this one counts once your code works"))
    return Result(chapter, case.name, case.points, case.points, "pass")
