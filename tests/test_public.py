"""The public checks of every chapter: each case of each tests/specs/chNN.py is one test.

Each runs against `--impl` (reference by default in the instructor's repository, `--impl learner`
for your course_lib) and fails with the same message `course check chNN` prints:

    pytest --impl learner tests/test_public.py -k ch02     # chapter 02 only
"""
from __future__ import annotations

import pytest

from course_lib.provided import chapters

PUBLIC_CASES = [pytest.param(number, case.name, id=f"ch{number}: {case.name}")
                for number in chapters.available() for case in chapters.load_spec(number).CASES]


# The whole chapter's results, once a chapter in a run: every failed case of a chapter reads its message there.
_CHAPTER_RESULTS: dict[str, list] = {}


@pytest.mark.parametrize(("chapter", "case"), PUBLIC_CASES)
def test_public_case(impl, chapter: str, case: str) -> None:
    (result,) = chapters.run_chapter(chapter, impl, cases=[case])
    if result.status != "pass":  # the message of `course check`: the whole chapter's evidence, the earlier
        if chapter not in _CHAPTER_RESULTS:  # chapters this case runs that fail theirs
            _CHAPTER_RESULTS[chapter] = chapters.run_with_prerequisites(chapter, impl)[0]
        message = next((r.message for r in _CHAPTER_RESULTS[chapter] if r.case == case and r.status != "pass"),
                       result.message)
        pytest.fail(message, pytrace=False)
