"""Find a chapter's checks by its number: spec in tests/specs/chNN.py, references in tests/reference/chNN.pt."""
from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from .checking import Result, judge, run_probe
from .loader import REPO_ROOT, load_file

SPEC_DIR = REPO_ROOT / "tests" / "specs"
REFERENCE_DIR = REPO_ROOT / "tests" / "reference"


def available() -> list[str]:
    """Chapter numbers that have checks, e.g. ['02']."""
    return sorted(p.stem[2:] for p in SPEC_DIR.glob("ch[0-9][0-9].py"))


def normalise(chapter: str | int) -> str:
    """'ch02', '02', '2' and 2 all mean chapter '02'."""
    m = re.fullmatch(r"(?:ch)?0*(\d{1,2})", str(chapter).strip().lower())
    if not m:
        raise ValueError(f"not a chapter: {chapter!r}; write it as ch02 (chapters with checks: "
                         f"{', '.join('ch' + c for c in available())})")
    number = f"{int(m.group(1)):02d}"
    if number not in available():
        raise ValueError(f"chapter {number} has no checks yet; chapters with checks: "
                         f"{', '.join('ch' + c for c in available())}")
    return number


def load_spec(chapter: str | int) -> ModuleType:
    number = normalise(chapter)
    return load_file(f"course_spec_ch{number}", SPEC_DIR / f"ch{number}.py")


def reference_path(chapter: str | int) -> Path:
    return REFERENCE_DIR / f"ch{normalise(chapter)}.pt"


def load_reference_outputs(chapter: str | int) -> dict[str, Any]:
    """The saved reference outputs: {case name: {"inputs", "expected", "mistakes"}}."""
    path = reference_path(chapter)
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; instructors regenerate it with `course refs`")
    return torch.load(path, weights_only=True)


def run_chapter(chapter: str | int, impl: Any, cases: list[str] | None = None) -> list[Result]:
    """Run the public cases of a chapter against ``impl`` and return one Result per case."""
    number = normalise(chapter)
    spec = load_spec(number)
    refs = load_reference_outputs(number)
    results = []
    for case in spec.CASES:
        if cases is not None and case.name not in cases:
            continue
        if case.name not in refs:
            raise KeyError(f"no reference outputs for case {case.name!r} of ch{number}; run `course refs`")
        saved = refs[case.name]
        actual = run_probe(spec.PROBES, case, impl, saved["inputs"])
        results.append(judge(number, case, actual, saved["inputs"], saved["expected"],
                             saved["mistakes"], spec.MISTAKES))
    return results
