"""`course refs`: regenerate tests/reference/chNN.pt from the reference implementation.

For every public case: the inputs (from the case's fixed seed), the reference's outputs, and the
outputs of each known-wrong variant (so that public checks can name a mistake without shipping its code).
"""
from __future__ import annotations

import argparse
from typing import Any

import torch

from course_lib.provided import chapters
from course_lib.provided.checking import run_probe
from course_lib.provided.layout import LAYOUT
from course_lib.provided.loader import load_impl

from .variants import wrong_impls


def outputs_for(chapter: str, case: Any, inputs: dict[str, torch.Tensor]) -> dict[str, Any]:
    spec = chapters.load_spec(chapter)
    expected = run_probe(spec.PROBES, case, load_impl("reference"), inputs)
    if isinstance(expected, BaseException):
        raise RuntimeError(f"the reference fails on ch{chapter} case {case.name!r}") from expected
    mistakes = {}
    for name, impl in wrong_impls(chapter).items():
        out = run_probe(spec.PROBES, case, impl, inputs)
        if not isinstance(out, BaseException):
            mistakes[name] = {k: v.detach() for k, v in out.items()}
    return {"expected": {k: v.detach() for k, v in expected.items()}, "mistakes": mistakes}


def build(chapter: str) -> dict[str, Any]:
    spec = chapters.load_spec(chapter)
    refs = {}
    for case in spec.CASES:
        torch.manual_seed(0)
        inputs = case.make_inputs(case.seed)
        refs[case.name] = {"inputs": inputs, **outputs_for(chapter, case, inputs)}
    return refs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="course refs", description=__doc__)
    parser.add_argument("chapters", nargs="*", help="chapters to regenerate (default: all), e.g. ch02")
    args = parser.parse_args(argv)
    numbers = [chapters.normalise(c) for c in args.chapters] or chapters.available()
    for number in numbers:
        path = chapters.reference_path(number)
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(build(number), path)
        print(f"wrote {LAYOUT.rel(path)}")
    return 0
