"""What the capstone's tests share, paid once a session: a strong run as a learner makes it with the quick
preset (300 steps of 64 at a peak learning rate of 3e-3, one thread, evaluated at 100, 200 and 300; about two
minutes), read by test_trained.py (the strong learner of a planted class, over the bar). The preset's own 600
steps would cost twice as much for nothing these tests check: 300 steps learn (81.0% on test here, over the bar
of 78%; 79.5% at the default 1e-3). Verify's tests re-run short recipes of their own (test_verify.py: since
verify trains the recipe with the reference's code, what it shows does not grow with the steps), and that the
preset's whole runs fit verify's default limits is read from the recorded runs.
Tests only read the run; what one changes, it copies first."""
from __future__ import annotations

from pathlib import Path

import pytest

STRONG_STEPS = 300


@pytest.fixture(scope="session")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A quick-preset run of STRONG_STEPS steps, evaluated three times: what a strong learner hands in."""
    from .test_trained import _run

    return _run(tmp_path_factory.mktemp("quick"), steps=STRONG_STEPS, eval_every=STRONG_STEPS // 3,
                extra=("--lr", "3e-3"))
