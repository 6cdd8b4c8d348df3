"""How far honest runs land apart: the capstone's bar and `course verify`'s tolerance, from recorded runs.

    quick = recorded_quick_runs(sorted(Path("book/data").glob("capstone_cpu*.json")))
    derive_bar([a for _, a in quick])                       # handin.BAR: the weakest quick run less 3 SE
    rerun_tolerance(seed_runs(Path("book/data") / SEED_RUNS))  # verify's: the quick recipe's five seeds

An accuracy on n reviews has one standard error sqrt(p (1 - p) / n). Two honest runs of one recipe differ by a
gap with sqrt(2) times the runs' standard deviation; that deviation is estimated from a few seeds, so the gap
over its estimate follows Student's t (t_tail, t_quantile: no SciPy needed), not the normal curve.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

FALSE_FAILURES = 0.001  # how often `course verify` may call an honest hand-in "failed": the tolerance's design
SEED_RUNS = "capstone_seeds_quick.json"  # beside the records (book/data/): the quick recipe, trained with 5 seeds
RECIPE = ("model", "preset", "size", "max_len", "batch_size", "steps", "dropout", "lr", "warmup", "eval_every",
          "bigrams", "seeds", "impl", "threads")  # what seed_runs' runs must share


def standard_error(accuracy_: float, n: int) -> float:
    """One standard error of an accuracy measured on ``n`` independent examples: sqrt(p (1 - p) / n)."""
    return math.sqrt(accuracy_ * (1 - accuracy_) / n)


def recorded_quick_runs(records: list[Path]) -> list[tuple[str, float]]:
    """(name, test accuracy of the best valid weights) of each quick-preset fine-tuning run in ``records``
    (``course capstone record`` files, e.g. book/data/capstone_cpu*.json)."""
    return [(run["name"], (run.get("best_valid") or run)["test_accuracy"]) for path in records
            for run in json.loads(Path(path).read_text(encoding="utf-8"))["finetune"] if run["preset"] == "quick"]


def derive_bar(accuracies: list[float], n: int = 1_723) -> float:
    """BAR's rule: the weakest accuracy less three standard errors of a test set of ``n``, floored to a percent."""
    weakest = min(accuracies)
    return math.floor(100 * (weakest - 3 * standard_error(weakest, n))) / 100


def seed_runs(record: Path) -> list[float]:
    """The test accuracies (at the best valid step) of the fine-tuning runs in ``record`` (a `course capstone
    record` file, book/data/capstone_seeds_quick.json), which must differ in their seed alone: how far apart
    honest runs of one recipe land, what `course verify` allows. ValueError if they differ otherwise."""
    runs = json.loads(Path(record).read_text(encoding="utf-8"))["finetune"]
    recipe = {k: v for k, v in runs[0].items() if k in RECIPE}
    differ = [r["name"] for r in runs if {k: v for k, v in r.items() if k in RECIPE} != recipe]
    if differ or len({r["seed"] for r in runs}) != len(runs):
        raise ValueError(f"{record}: the runs must differ in their seed alone; {differ or 'seeds repeat'}")
    return [(r.get("best_valid") or r)["test_accuracy"] for r in runs]


def t_tail(t: float, df: int, pieces: int = 1_000) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom and t >= 0: one half less the integral of its
    density from 0 to t (Simpson's rule, ``pieces`` even; within 1e-9 for the t and df used here)."""
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

    def density(x: float) -> float:
        return c * (1 + x * x / df) ** (-(df + 1) / 2)
    h = t / pieces
    inner = sum((4 if i % 2 else 2) * density(i * h) for i in range(1, pieces))
    return 0.5 - (density(0.0) + inner + density(t)) * h / 3


def t_quantile(tail: float, df: int) -> float:
    """The t with P(T > t) = ``tail`` (0 < tail < 1/2) for Student's t with ``df`` degrees of freedom (bisection)."""
    low, high = 0.0, 1_000.0
    for _step in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if t_tail(middle, df) > tail else (low, middle)
    return (low + high) / 2


def rerun_tolerance(accuracies: list[float], false_failures: float = FALSE_FAILURES) -> float:
    """How far below a hand-in a re-run of its recipe may land and still verify it, rounded up to a tenth of a
    point. Two honest runs differ by D, with a standard deviation of sqrt(2) sigma; sigma is estimated by the
    sample standard deviation s of the n ``accuracies`` (runs of the recipe that differ in their seed), so
    D / (sqrt(2) s) follows Student's t with n - 1 degrees of freedom, and a gap beyond t_{n-1} sqrt(2) s, where
    P(T > t_{n-1}) = ``false_failures``, fails an honest hand-in that rarely (were the runs' noise normal)."""
    n = len(accuracies)
    mean = sum(accuracies) / n
    sd = math.sqrt(sum((a - mean) ** 2 for a in accuracies) / (n - 1))
    return math.ceil(1000 * t_quantile(false_failures, n - 1) * math.sqrt(2) * sd) / 1000
