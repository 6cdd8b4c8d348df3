"""Fixtures shared by the instructor's tests."""
from __future__ import annotations

import pytest

from notebook_fixture import make_source, release_of


@pytest.fixture(scope="module")
def chapter(tmp_path_factory):
    """The synthetic nbgrader chapter of notebook_fixture.py: (source notebook, its release)."""
    root = tmp_path_factory.mktemp("chapter")
    source = make_source(root)
    return source, release_of(source)
