"""Shared pytest options: `pytest --impl learner` runs the public checks on your course_lib.

The project's own suite runs them on the reference (`--impl reference`, the default), so it is
green on a clone of the instructor's repository; a learner runs `pytest --impl learner tests/test_ch02_attention.py`
(or, nicer, `course check ch02`).
"""
from __future__ import annotations

import pytest

from course_lib.provided.loader import load_impl


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--impl", choices=["reference", "learner"], default="reference",
                     help="which course_lib the public chapter checks run on (default: reference)")


@pytest.fixture(scope="session")
def impl_name(request: pytest.FixtureRequest) -> str:
    return request.config.getoption("--impl")


@pytest.fixture(scope="session")
def impl(impl_name: str):
    return load_impl(impl_name)
