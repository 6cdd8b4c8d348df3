"""The benchmark scripts run, and compare like with like (speed itself is never asserted: see their output)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from course_lib.provided.layout import LAYOUT


def test_bench_encoder_compares_two_models_of_the_same_size(tmp_path) -> None:
    record = {"recorded": "2026-11-30T12:00:00+00:00", "hardware": {"gpu": None, "torch_threads": 1},
              "baselines": [{"name": "TF-IDF (char 1-3) + LR", "valid_accuracy": 0.8}],
              "finetune": [{"name": "finetune-a", "seconds_to_beat_tfidf_valid": 250.0, "beats_tfidf_valid_at_step": 200,
                            "steps": 400, "curve": [[200, 0.81]], "test_accuracy": 0.85},
                           {"name": "finetune-b", "seconds_to_beat_tfidf_valid": None, "beats_tfidf_valid_at_step": None,
                            "steps": 200, "curve": [[100, 0.7], [200, 0.79]], "test_accuracy": 0.78}]}
    (tmp_path / "record.json").write_text(json.dumps(record))
    proc = subprocess.run([sys.executable, "solutions/scripts/bench_encoder.py", "--quick", "--rounds", "1",
                           "--steps", "1", "--device", "cpu", "--runs", str(tmp_path / "record.json")],
                          cwd=LAYOUT.root, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"finetune-a\s+250 s \(step 200\); test 85.0% at the last step", proc.stdout), proc.stdout
    assert re.search(r"finetune-b\s+not beaten in 200 steps \(best valid 79.0%\)", proc.stdout), proc.stdout
    counts = re.findall(r"^(?:ours|torch)\S*.*?\s([\d,]+)\s+[\d.]+\s+[\d.]+$", proc.stdout, re.M)
    assert len(counts) == 2 and counts[0] == counts[1], proc.stdout  # the same model on both sides
    assert re.search(r"throughput ratio ours / PyTorch's = \d+\.\d\d", proc.stdout), proc.stdout


def test_bench_grade_projects_a_class_from_its_fixed_part_and_its_part_per_learner() -> None:
    proc = subprocess.run([sys.executable, "solutions/scripts/bench_grade.py", "-n", "3", "--chapters", "ch01", "--cold"],
                          cwd=LAYOUT.root, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = dict(re.findall(r"^(ch01 \(its own assignment\)(?:, cold)?|every chapter, one submission(?:, cold)?)\s+(.*) "
                           r"min$", proc.stdout, re.M))
    assert len(rows) == 4, proc.stdout  # the warm sandbox, and the cold way beside it
    for numbers in rows.values():
        prepare, cold, per, projected = map(float, numbers.split())
        # a first run on 200: the cold run of --jobs learners, then 198 more at the measured rate (to rounding)
        assert abs(projected * 60 - (cold + 198 * per)) <= 0.05 * 60 + 198 * 0.005, proc.stdout
        assert 0 <= prepare <= cold
    assert re.search(r"one assignment per chapter: [\d.]+ min \(cold way: [\d.]+ min\); goal < 6 min: (met|NOT met)",
                     proc.stdout), proc.stdout


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                    reason="torch.compile on the CPU needs a C compiler")
def test_bench_encoder_compiles_both_sides_when_asked() -> None:
    proc = subprocess.run([sys.executable, "solutions/scripts/bench_encoder.py", "--quick", "--rounds", "1",
                           "--steps", "1", "--device", "cpu", "--compile", "--runs", "/nonexistent"],
                          cwd=LAYOUT.root, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "torch.compile on both" in proc.stdout and "throughput ratio ours / PyTorch's" in proc.stdout
    assert "no finished capstone runs under /nonexistent" in proc.stdout
