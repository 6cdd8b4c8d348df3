"""Shared pytest options: which course_lib the public chapter checks run on.

    pytest --impl learner tests/test_public.py -k ch02     # your course_lib (what `course check` runs)
    pytest --impl reference                                # the instructor's reference implementation

The default is the reference where it exists (the instructor's repository, whose own suite must be
green) and your course_lib everywhere else (a learner's tree, which has no solutions/).
"""
from __future__ import annotations

import pytest

from course_lib.provided.layout import LAYOUT
from course_lib.provided.loader import load_impl

DEFAULT_IMPL = "reference" if (LAYOUT.reference / "__init__.py").is_file() else "learner"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "training: trains a small model for a few seconds")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--impl", choices=["reference", "learner"], default=DEFAULT_IMPL,
                     help=f"which course_lib the public chapter checks run on (default here: {DEFAULT_IMPL})")


@pytest.fixture(scope="session")
def impl_name(request: pytest.FixtureRequest) -> str:
    return request.config.getoption("--impl")


@pytest.fixture(scope="session")
def impl(impl_name: str):
    return load_impl(impl_name)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A stub's NotImplementedError is one line, as in `make check`, not a traceback with its docstring
    (``--tb=long`` keeps the traceback)."""
    outcome = yield
    report = outcome.get_result()
    if (call.excinfo is not None and call.excinfo.errisinstance(NotImplementedError)
            and item.config.getoption("tbstyle") not in ("long", "native")):
        report.longrepr = f"not implemented yet: {call.excinfo.value}"
