"""What the capstone's tests share, paid once a session: the quick preset's run as a learner makes it (600 steps of
64 on one thread, a few minutes), read by test_trained.py (the strong learner of a planted class) and test_verify.py
(a whole quick run re-run under verify's limits). Tests only read it; what one changes, it copies first."""
from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The quick preset as a learner runs it: 600 steps, evaluated at 200, 400 and 600."""
    from .test_trained import _run

    return _run(tmp_path_factory.mktemp("quick"), steps=600)
