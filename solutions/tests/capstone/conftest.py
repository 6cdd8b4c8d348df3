"""What the capstone's tests share, paid once a session: a strong run as a learner makes it with the quick
preset (250 steps of 64 at a peak learning rate of 3e-3, one thread, evaluated once, at its end; about a minute
and a half), read by test_trained.py (the strong learner of a planted class, over the bar) and test_verify.py (a
longer run's weights smuggled under a short run's summary). Both files are in one xdist group, so one worker
trains it once. The preset's own 600 steps would cost more than twice as much for nothing these tests check:
250 steps learn (81.2% on test here, over the bar of 78%; 300 steps with three evaluations, as before, 81.0% in a
third more time; 200 steps 79.3%, too near the bar). Verify's tests re-run short recipes of their own
(test_verify.py: since verify trains the recipe with the reference's code, what it shows does not grow with the
steps), and that the preset's whole runs fit verify's default limits is read from the recorded runs.
Tests only read the run; what one changes, it copies first."""
from __future__ import annotations

from pathlib import Path

import pytest

STRONG_STEPS = 250
GROUP = pytest.mark.xdist_group("capstone_quick_run")  # the pytestmark of every file that reads quick_run


@pytest.fixture(scope="session")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A quick-preset run of STRONG_STEPS steps, evaluated at its end: what a strong learner hands in."""
    from .test_trained import _run

    return _run(tmp_path_factory.mktemp("quick"), steps=STRONG_STEPS, eval_every=STRONG_STEPS,
                extra=("--lr", "3e-3"))
