"""The examples in the reference's docstrings (which the stubs carry to learners) run as written, each
importing what it uses: a learner who pastes one into a fresh Python gets the output shown."""
from __future__ import annotations

import doctest
import importlib

import pytest

from course_lib.provided.layout import LAYOUT

MODULES = sorted(p.stem for p in LAYOUT.reference.glob("*.py") if p.stem != "__init__")


@pytest.mark.parametrize("module", MODULES)
def test_docstring_examples_run_on_their_own(module: str) -> None:
    mod = importlib.import_module(f"course_ref.{module}")
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = doctest.DocTestFinder().find(mod)
    for test in tests:
        test.globs.pop("torch", None)  # an example that uses torch imports it itself
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, f"{results.failed} of {results.attempted} examples in {module}.py fail"
