"""Helpers for the graded cells of the exercise notebooks.

    assert_cases("02", ["values, no mask", ...])   # run named public checks; fail with their messages
    with graded("more checks on masks"):           # a block of checks whose failure shows only a message
        expect_close("output", actual, expected)

A failure raises ``CheckFailed``, an ``AssertionError``. In Jupyter its traceback is only its message
(``_render_traceback_``): you read what is wrong in your code, not the code of the test.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from torch import Tensor

from . import chapters
from .checking import compare_one
from .loader import load_impl


class CheckFailed(AssertionError):
    """A graded check failed; the message says what is wrong."""

    def _render_traceback_(self) -> list[str]:  # IPython shows these lines instead of a traceback
        lines = str(self).splitlines() or ["failed"]
        return [f"{type(self).__name__}: {lines[0]}", *lines[1:]]


def assert_cases(chapter: str | int, names: Sequence[str]) -> None:
    """Run the named public cases of a chapter on your course_lib; raise CheckFailed if any fails."""
    number = chapters.normalise(chapter)
    known = [case.name for case in chapters.load_spec(number).CASES]
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"chapter {number} has no case(s) {unknown}; its cases are {known}")
    results = chapters.run_chapter(number, load_impl("learner"), cases=list(names))
    failed = [r for r in results if r.status != "pass"]
    if failed:
        raise CheckFailed("\n".join(
            [f"{len(failed)} of {len(results)} check(s) failed:"]
            + [f"- {r.case}: {r.message}" for r in failed]))
    print(f"passed {len(results)} public check(s): {', '.join(names)}")


def expect_close(what: str, actual: object, expected: Tensor, rtol: float = 1e-4, atol: float = 1e-5,
                 ignore: Tensor | None = None) -> None:
    """Raise CheckFailed unless ``actual`` is a tensor of the expected dtype, shape and values."""
    message = compare_one(what, actual, expected, rtol, atol, ignore)
    if message is not None:
        raise CheckFailed(message)


@contextmanager
def graded(label: str) -> Iterator[None]:
    """Report any failure inside the block as ``CheckFailed("<label>: <what went wrong>")``.

    An AssertionError keeps its message; an exception raised by your code is named with its message;
    the traceback (which would show the test's code) is left out.
    """
    try:
        yield
    except AssertionError as exc:
        raise CheckFailed(f"{label}: {str(exc) or 'failed'}") from None
    except NotImplementedError as exc:
        raise CheckFailed(f"{label}: not implemented yet: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - learner code may raise anything
        raise CheckFailed(f"{label}: your code raised {type(exc).__name__}: {exc}") from None
