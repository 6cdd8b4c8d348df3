"""What the capstone's tests share, paid once a session: a strong run as a learner makes it with the quick
preset and its own options (100 steps of 64 at a peak learning rate of 3e-3, without dropout, with the
character-bigram inputs seen at least 20 times, ``--bigrams 20``; one thread, evaluated once, at its end:
about 25 s), read by
test_trained.py (the strong learner of a planted class, over the bar) and test_verify.py (a longer run's weights
smuggled under a short run's summary; that short run has the same inputs, so the weights fit it). Both files are
in one xdist group, so one worker trains it once. The preset's own 600 steps would cost several times as much for
nothing these tests check. Measured here, with bigrams: without dropout 100 steps 81.0% on test (26 s), 80 steps
78.6% (too near the bar of 78%), 120 steps 80.6% (31 s); with the preset's dropout of 0.1 150 steps 80.8% (51 s),
120 steps 80.5% (42 s), 200 steps 81.5%; without bigrams 250 steps 81.2% (89 s), 200 steps 79.3%.
Verify's tests re-run short recipes of their own (test_verify.py: since verify trains the recipe with the
reference's code, what it shows does not grow with the steps), and that the preset's whole runs fit verify's
default limits is read from the recorded runs. Tests only read the run; what one changes, it copies first.

A weak run, two steps of the quick preset evaluated after each (about 12 s), is shared by test_trained.py,
test_handin.py and test_leaderboard.py: trained once a run, by the first worker that asks for it."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

STRONG_STEPS = 100
BIGRAMS = ("--bigrams", "20")  # the strong run's inputs, and the short run's that verify re-runs
RUN_NAME = "finetune-transformer-quick"  # the folder a quick-preset transformer run writes in --out
GROUP = pytest.mark.xdist_group("capstone_quick_run")  # the pytestmark of every file that reads quick_run


@pytest.fixture(scope="session")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A quick-preset run of STRONG_STEPS steps with bigram inputs, evaluated at its end: what a strong learner hands
    in."""
    from .test_trained import _run

    return _run(tmp_path_factory.mktemp("quick"), steps=STRONG_STEPS, eval_every=STRONG_STEPS,
                extra=("--lr", "3e-3", "--dropout", "0", *BIGRAMS))


@pytest.fixture(scope="session")
def two_step_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A quick-preset run of 2 steps, evaluated after each: what a weak learner hands in (read only; copy to change).
    Trained once a run: under pytest-xdist, the first worker that asks trains it into the run's base folder under a
    file lock, and the other reads it there (or, asking while it is being trained, trains its own)."""
    from filelock import FileLock, Timeout

    from .test_trained import _run

    def train(root: Path) -> Path:
        return _run(root, steps=2, eval_every=1)

    if not os.environ.get("PYTEST_XDIST_WORKER"):  # no xdist: this process's own
        return train(tmp_path_factory.mktemp("two_steps"))
    root = tmp_path_factory.getbasetemp().parent / "two_steps"  # pytest-N/, every worker's basetemp's parent
    try:
        with FileLock(f"{root}.lock", timeout=0):
            if not (root / RUN_NAME / "summary.json").is_file():  # not yet, or a worker died while training it
                shutil.rmtree(root, ignore_errors=True)
                train(root)
            return root / RUN_NAME
    except Timeout:  # the other worker is training it now: this one trains its own rather than wait with a core idle
        return train(tmp_path_factory.mktemp("two_steps"))
