"""Tests of the tests: the checks reward the reference, give 0 to the stub, and name every known mistake.

Known-wrong variants live in solutions/mistakes/chNN.py; each must lose points on at least one public
case and be named there by its own message (MISTAKES in the chapter's spec).
"""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from course_lib.provided import chapters
from course_lib.provided.checking import total
from course_lib.provided.layout import REPO_ROOT
from course_lib.provided.loader import load_impl

from course_admin import refs
from course_admin.variants import wrong_impls

CHAPTERS = chapters.available()
MISTAKES = [(ch, name) for ch in CHAPTERS for name in chapters.load_spec(ch).MISTAKES]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_reference_scores_full_marks(chapter: str) -> None:
    results = chapters.run_chapter(chapter, load_impl("reference"))
    earned, possible = total(results)
    assert possible > 0 and earned == possible, [r.message for r in results if r.status != "pass"]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_stub_scores_zero_and_says_not_implemented(chapter: str) -> None:
    results = chapters.run_chapter(chapter, load_impl("learner"))
    assert total(results)[0] == 0, [r.case for r in results if r.status == "pass"]
    assert all("not implemented yet" in r.message for r in results)


@pytest.mark.parametrize("chapter,mistake", MISTAKES)
def test_known_mistake_loses_points_with_its_own_message(chapter: str, mistake: str) -> None:
    impl = wrong_impls(chapter)[mistake]
    results = chapters.run_chapter(chapter, impl)
    earned, possible = total(results)
    assert earned < possible, f"{mistake} scores full marks"
    named = [r for r in results if mistake in r.mistakes]
    assert named, f"{mistake} is never named; messages: {[r.message for r in results]}"
    assert chapters.load_spec(chapter).MISTAKES[mistake] in named[0].message


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_declared_mistake_has_a_variant(chapter: str) -> None:
    assert set(chapters.load_spec(chapter).MISTAKES) == set(wrong_impls(chapter))


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_committed_reference_outputs_match_a_fresh_regeneration(chapter: str) -> None:
    committed = chapters.load_reference_outputs(chapter)
    fresh = refs.build(chapter)
    assert sorted(committed) == sorted(fresh), "cases were added or removed: run `course refs`"
    for case, saved in fresh.items():
        for part in ("inputs", "expected"):
            assert committed[case][part].keys() == saved[part].keys()
            for key, value in saved[part].items():
                torch.testing.assert_close(committed[case][part][key], value, rtol=1e-5, atol=1e-6,
                                           equal_nan=True, msg=lambda m: f"{case}/{part}/{key}: {m}; run `course refs`")
        assert sorted(committed[case]["mistakes"]) == sorted(saved["mistakes"])


def test_course_check_cli_exit_code_and_json() -> None:
    ok = subprocess.run([sys.executable, "-m", "course_lib.provided.cli", "check", "ch02", "--impl", "reference", "--json"],
                        capture_output=True, text=True, cwd=REPO_ROOT)
    assert ok.returncode == 0, ok.stderr
    assert '"earned": 10.0' in ok.stdout
    stub = subprocess.run([sys.executable, "-m", "course_lib.provided.cli", "check", "ch02"],
                          capture_output=True, text=True, cwd=REPO_ROOT)
    assert stub.returncode == 1 and "not implemented yet" in stub.stdout and "0/10" in stub.stdout


def test_course_check_rejects_an_unknown_chapter() -> None:
    bad = subprocess.run([sys.executable, "-m", "course_lib.provided.cli", "check", "ch99"],
                         capture_output=True, text=True, cwd=REPO_ROOT)
    assert bad.returncode == 2 and "chapter 99 has no checks yet" in bad.stderr
