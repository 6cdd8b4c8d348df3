"""Every hidden case says, in the learner's language, what it checks (issue 42).

A failed hidden case's row ends "(this hidden case checks: ...)" with the case's ``about``, translated
(grading/verdict.py ``hidden_property``; release/messages.py extracts the abouts for the catalog). A case without one
is named by its id, which in the Chinese edition is an English identifier (`h-float64-heads`): here every hidden case
of solutions/hidden must have an ``about``, with its zh_CN translation, that does not quote its inputs. Fast: the
hidden files are read, nothing is graded and no sandbox runs.
"""
from __future__ import annotations

import dataclasses
import re
from types import SimpleNamespace

import pytest

from course_admin.grading.plan import hidden_cases
from course_admin.grading.verdict import hidden_property
from course_admin.release import messages
from course_lib.provided import chapters
from course_lib.provided.checking import Case
from course_lib.provided.layout import LAYOUT

pytestmark = pytest.mark.skipif(not (LAYOUT.root / "solutions" / "hidden" / "ch02.py").is_file(),
                                reason="the hidden cases ship only with the instructor's repository")

QUOTED_VALUE = re.compile(r"\w\s*=\s*-?\d")  # "seq_q=9", "pad_id = 3": an input maker's argument, quoted


def without_a_say(cases: list[Case], catalog: dict[str, str]) -> list[str]:
    """The hidden cases among ``cases`` that do not say what they check in every language, one line each: no
    ``about``, an ``about`` that ``catalog`` (English -> Chinese) does not translate, or one that quotes the
    case's inputs (its seed, or a ``name=number`` of its input maker)."""
    found = []
    for case in cases:
        about = case.about.strip()
        if not about:
            found.append(f"{case.name}: no about")
        elif not catalog.get(about):
            found.append(f"{case.name}: its about {about!r} has no zh_CN translation")
        elif str(case.seed) in about or QUOTED_VALUE.search(about):
            found.append(f"{case.name}: its about {about!r} quotes its inputs")
    return found


def every_hidden_case() -> list[Case]:
    """The hidden cases of every chapter, in order."""
    return [case for number in chapters.available() for case in hidden_cases(number)]


def test_every_hidden_case_says_what_it_checks_in_chinese() -> None:
    cases = every_hidden_case()
    assert len(cases) > 100, "the hidden cases of chapters 01-08 were read"
    left = without_a_say(cases, messages.load("zh_CN"))
    assert not left, f"{len(left)} hidden case(s) would be named by an English id in Chinese:\n" + "\n".join(left)


def test_a_planted_case_without_an_about_or_its_translation_is_caught() -> None:
    """The check above fails on a hidden case with no about, with an untranslated one, or with one that quotes its
    inputs; a real case passes it."""
    real = every_hidden_case()[0]
    planted = [dataclasses.replace(real, name="h-planted-none", about=""),
               dataclasses.replace(real, name="h-planted-blank", about="  "),
               dataclasses.replace(real, name="h-planted-english", about="a property nobody has translated"),
               dataclasses.replace(real, name="h-planted-seed", about=f"float64 on seed {real.seed}"),
               dataclasses.replace(real, name="h-planted-shape", about="no mask, seq_q=9")]
    catalog = {**messages.load("zh_CN"), planted[3].about: "种子", planted[4].about: "无掩码"}  # translated, yet quoting
    found = without_a_say([real, *planted], catalog)
    assert [line.split(":")[0] for line in found] == [case.name for case in planted], found
    why = [line.split(": ", 1)[1] for line in found]
    assert why[0] == why[1] == "no about" and why[2].endswith("has no zh_CN translation"), why
    assert all(w.endswith("quotes its inputs") for w in why[3:]), why


def test_a_hidden_row_in_chinese_says_the_translated_about(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COURSE_LANG", "zh_CN")
    catalog = messages.load("zh_CN")
    said = {case.name: hidden_property(SimpleNamespace(case=case)) for case in every_hidden_case()}
    assert said == {case.name: catalog[case.about.strip()] for case in every_hidden_case()}


def test_a_case_without_an_about_is_named_by_its_id(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fallback no shipped hidden case takes now: English words made from the id, in Chinese the id as code."""
    g = SimpleNamespace(case=Case("h-planted-case", 1.0, "forward", lambda seed: {}, seed=1))
    monkeypatch.setenv("COURSE_LANG", "en")
    assert hidden_property(g) == "planted case"
    monkeypatch.setenv("COURSE_LANG", "zh_CN")
    assert hidden_property(g) == "`h-planted-case`"
