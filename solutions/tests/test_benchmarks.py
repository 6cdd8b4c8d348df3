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
