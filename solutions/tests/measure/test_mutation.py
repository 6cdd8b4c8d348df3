"""The mutation bar (issue 18): every non-equivalent mutant of the reference is killed by a chapter's cases.

solutions/scripts/mutation_score.py grades Cosmic Ray's mutants of each chapter's reference modules by its
public, then hidden cases; the survivors read and found equivalent are listed with a reason in
solutions/hidden/chNN_equivalent.py. These tests pin that list to what the tool finds today: each listed
mutant exists and still survives (every chapter), and chapter 02's whole run finds exactly those survivors with
>= 90% killed by public cases. Planted: chapter 02 without its dropout cases leaves unexplained survivors.
"""
from __future__ import annotations

import pytest

from course_lib.provided import chapters
from course_admin.measure import mutation as mutation_score
from course_lib.provided.layout import chapter_facts

pytestmark = [pytest.mark.slow]

CHAPTERS = chapters.available()


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_each_listed_equivalent_mutant_exists_and_survives(chapter: str) -> None:
    listed = mutation_score.equivalent(chapter)
    ids = {m.id for module in chapter_facts(chapter).modules for m in mutation_score.mutants(module)}
    assert set(listed) <= ids, f"listed but no longer made by the tool: {sorted(set(listed) - ids)}"
    assert all(isinstance(why, str) and len(why) > 20 for why in listed.values()), listed
    if listed:
        result = mutation_score.score(chapter, only=list(listed))
        assert {m.id for m in result.survivors} == set(listed), "killed now: remove them from the list"


def test_chapter_02_meets_the_bar_with_exactly_its_listed_survivors() -> None:
    result = mutation_score.score("02")
    assert {m.id for m in result.survivors} == set(result.equivalent)
    assert result.unexplained == [] and result.public_share >= 0.9, mutation_score.table([result])


def test_a_chapter_without_its_dropout_cases_leaves_unexplained_survivors(monkeypatch) -> None:
    """Planted: the bar notices a missing case (ch02's dropout mutants survive without the dropout cases)."""
    every = mutation_score.graded_cases
    monkeypatch.setattr(mutation_score, "graded_cases",
                        lambda number: [g for g in every(number) if g.case.probe != "dropout"])
    result = mutation_score.score("02")
    assert any("Gt_Eq" in m.id for m in result.unexplained), [m.id for m in result.unexplained]
