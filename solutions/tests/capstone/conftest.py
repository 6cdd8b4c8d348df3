"""What the capstone's tests share, paid once a session: a strong run as a learner makes it with the quick
preset and its own options (150 steps of 64 at a peak learning rate of 3e-3, with the character-bigram inputs
seen at least 20 times, ``--bigrams 20``; one thread, evaluated once, at its end: about 45 s), read by
test_trained.py (the strong learner of a planted class, over the bar) and test_verify.py (a longer run's weights
smuggled under a short run's summary; that short run has the same inputs, so the weights fit it). Both files are
in one xdist group, so one worker trains it once. The preset's own 600 steps would cost several times as much for
nothing these tests check. Measured here: 150 steps with bigrams 80.8% on test (43 s), 200 steps 81.5% (56 s);
without bigrams 250 steps 81.2% (89 s), 200 steps 79.3%, 300 steps of 32 79.9% (too near the bar of 78%).
Verify's tests re-run short recipes of their own (test_verify.py: since verify trains the recipe with the
reference's code, what it shows does not grow with the steps), and that the preset's whole runs fit verify's
default limits is read from the recorded runs. Tests only read the run; what one changes, it copies first.

A weak run, two steps of the quick preset evaluated after each (about 8 s), is shared the same way by
test_trained.py, test_handin.py and test_leaderboard.py: trained once on each worker that runs one of them."""
from __future__ import annotations

from pathlib import Path

import pytest

STRONG_STEPS = 150
BIGRAMS = ("--bigrams", "20")  # the strong run's inputs, and the short run's that verify re-runs
GROUP = pytest.mark.xdist_group("capstone_quick_run")  # the pytestmark of every file that reads quick_run


@pytest.fixture(scope="session")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A quick-preset run of STRONG_STEPS steps with bigram inputs, evaluated at its end: what a strong learner hands
    in."""
    from .test_trained import _run

    return _run(tmp_path_factory.mktemp("quick"), steps=STRONG_STEPS, eval_every=STRONG_STEPS,
                extra=("--lr", "3e-3", *BIGRAMS))


@pytest.fixture(scope="session")
def two_step_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A quick-preset run of 2 steps, evaluated after each: what a weak learner hands in (read only; copy to change)."""
    from .test_trained import _run

    return _run(tmp_path_factory.mktemp("two_steps"), steps=2, eval_every=1)
