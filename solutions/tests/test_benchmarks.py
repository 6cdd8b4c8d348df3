"""The benchmark scripts run, and compare like with like (speed itself is never asserted: see their output)."""
from __future__ import annotations

import re
import subprocess
import sys

from course_lib.provided.layout import LAYOUT


def test_bench_encoder_compares_two_models_of_the_same_size() -> None:
    proc = subprocess.run([sys.executable, "solutions/scripts/bench_encoder.py", "--quick", "--rounds", "1",
                           "--steps", "1", "--device", "cpu"], cwd=LAYOUT.root, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    counts = re.findall(r"^(?:ours|torch)\S*.*?\s([\d,]+)\s+[\d.]+\s+[\d.]+$", proc.stdout, re.M)
    assert len(counts) == 2 and counts[0] == counts[1], proc.stdout  # the same model on both sides
    assert re.search(r"throughput ratio ours / PyTorch's = \d+\.\d\d", proc.stdout), proc.stdout


def test_bench_grade_projects_a_class_from_its_fixed_part_and_its_part_per_learner() -> None:
    proc = subprocess.run([sys.executable, "solutions/scripts/bench_grade.py", "-n", "3", "--chapters", "ch01"],
                          cwd=LAYOUT.root, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = dict(re.findall(r"^(ch01 \(its own assignment\)|every chapter, one submission)\s+(.*) min$", proc.stdout,
                           re.M))
    assert len(rows) == 2, proc.stdout
    for numbers in rows.values():
        prepare, cold, per, projected = map(float, numbers.split())
        # a first run on 200: the cold run of --jobs learners, then 198 more at the measured rate (to rounding)
        assert abs(projected * 60 - (cold + 198 * per)) <= 0.05 * 60 + 198 * 0.005, proc.stdout
        assert 0 <= prepare <= cold
    assert re.search(r"one assignment per chapter: [\d.]+ min; goal < 15 min: (met|NOT met)", proc.stdout)
