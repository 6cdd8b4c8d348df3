"""The benchmark scripts run, and compare like with like (speed itself is never asserted: see their output).

Each run is the benchmark's ``--tiny`` configuration: the same measurements and reports on a toy workload of a
few seconds of CPU that does not grow with the machine's load (a busy machine makes it slower, never larger).
``SAFETY_S`` is a safety net for a benchmark that hangs, far above what the work takes beside twelve spinning
processes on two cores; no assert is on time.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from course_admin.measure import bench_encoder
from course_lib.provided.layout import LAYOUT

pytestmark = [pytest.mark.grading, pytest.mark.training]

SAFETY_S = 1800


def test_bench_encoder_compares_two_models_of_the_same_size(tmp_path) -> None:
    record = {"recorded": "2026-11-30T12:00:00+00:00", "hardware": {"gpu": None, "torch_threads": 1},
              "baselines": [{"name": "TF-IDF (char 1-3) + LR", "valid_accuracy": 0.8}],
              "finetune": [{"name": "finetune-a", "seconds_to_beat_tfidf_valid": 250.0, "beats_tfidf_valid_at_step": 200,
                            "steps": 400, "curve": [[200, 0.81]], "test_accuracy": 0.85},
                           {"name": "finetune-b", "seconds_to_beat_tfidf_valid": None, "beats_tfidf_valid_at_step": None,
                            "steps": 200, "curve": [[100, 0.7], [200, 0.79]], "test_accuracy": 0.78}]}
    (tmp_path / "record.json").write_text(json.dumps(record))
    proc = subprocess.run([sys.executable, "solutions/scripts/bench_encoder.py", "--tiny", "--rounds", "2",
                           "--steps", "1", "--device", "cpu", "--runs", str(tmp_path / "record.json")],
                          cwd=LAYOUT.root, capture_output=True, text=True, timeout=SAFETY_S)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"finetune-a\s+250 s \(step 200\); test 85.0% at the last step", proc.stdout), proc.stdout
    assert re.search(r"finetune-b\s+not beaten in 200 steps \(best valid 79.0%\)", proc.stdout), proc.stdout
    rows = re.findall(r"^(?:ours|torch)\S*.*?\s([\d,]+)\s+[\d.]+\s+([\d.]+)\s+([\d.]+)$", proc.stdout, re.M)
    assert len(rows) == 2 and rows[0][0] == rows[1][0], proc.stdout  # the same model on both sides
    for _, tensors, process in rows:  # real peaks: tensors of a step (params, AdamW, activations) inside the process
        assert 0 < float(tensors) < float(process), proc.stdout
    assert "toy (--tiny) sizes {'d_model': 16, 'num_heads': 2, 'd_ff': 32, 'num_layers': 1" in proc.stdout
    assert re.search(r"throughput ratio ours / PyTorch's = \d+\.\d\d \(interquartile range \d+\.\d\d-\d+\.\d\d "
                     r"over 2 rounds", proc.stdout), proc.stdout
    assert re.search(r"per CPU second .* = \d+\.\d\d \(interquartile range", proc.stdout), proc.stdout
    assert re.search(r"peak tensor memory ratio ours / PyTorch's = \d+\.\d\d", proc.stdout), proc.stdout


def test_the_benchmarks_measure_the_capstones_own_sizes_unless_tiny() -> None:
    """Without --tiny the encoder bench times the capstone preset's model and batches (read, not run here)."""
    assert bench_encoder.capstone_size("quick") == {"d_model": 128, "num_heads": 4, "d_ff": 256, "num_layers": 2,
                                                    "batch": 64, "max_len": 128}
    assert bench_encoder.bench_size("quick") == bench_encoder.capstone_size("quick")
    assert bench_encoder.bench_size("tiny") == bench_encoder.TINY


@pytest.mark.slow
def test_bench_grade_projects_a_class_from_its_fixed_part_and_its_part_per_learner() -> None:
    proc = subprocess.run([sys.executable, "solutions/scripts/bench_grade.py", "--tiny", "--chapters", "ch01", "--cold"],
                          cwd=LAYOUT.root, capture_output=True, text=True, timeout=SAFETY_S)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("2 learners, chapters 01 (course_lib only), --jobs 1"), proc.stdout
    rows = dict(re.findall(r"^(ch01 \(its own assignment\)(?:, cold)?|every chapter, one assignment each(?:, cold)?)"
                           r"\s+(.*) min$", proc.stdout, re.M))
    assert len(rows) == 4, proc.stdout  # the warm sandbox, and the cold way beside it
    for numbers in rows.values():
        prepare, cold, per, projected = map(float, numbers.split())
        # a first run on 200: the cold run of --jobs learners, then 199 more at the measured rate (to rounding)
        assert abs(projected * 60 - (cold + 199 * per)) <= 0.05 * 60 + 199 * 0.005, proc.stdout
        assert 0 <= prepare <= cold
    assert re.search(r"one assignment per chapter: [\d.]+ min \(cold way: [\d.]+ min\); goal < 6 min: (met|NOT met)",
                     proc.stdout), proc.stdout


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                    reason="torch.compile on the CPU needs a C compiler")
@pytest.mark.slow
@pytest.mark.long  # handed out early (suite_times.py): not the run's last minute
def test_bench_encoder_compiles_both_sides_when_asked(tmp_path) -> None:
    """torch.compile'd, with caches of its own (the same compiling work on every run: Inductor's, and through
    TMPDIR its precompiled headers) and no peak processes (each would compile again: the peaks are the first
    test's). The same graphs are traced, lowered and compiled to C++ as in the capstone's --compile, built in
    fewer and cheaper compiler runs, since the toy's timings mean nothing either way:
    - without optimising (TORCHINDUCTOR_DEBUG_COMPILE: -O0, not -O3): 78 s of CPU rather than 94;
    - in Inductor's C++ wrapper mode (TORCHINDUCTOR_CPP_WRAPPER): each graph's kernels and the code that calls
      them in one C++ file, with Inductor's kernel header precompiled once: 4 compiler runs and a header instead
      of 30, 65-69 s of CPU rather than 86-88 (measured here, two of each, beside each other)."""
    import os

    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"), "TMPDIR": str(tmp_path),
           "TORCHINDUCTOR_DEBUG_COMPILE": "1", "TORCHINDUCTOR_CPP_WRAPPER": "1"}
    proc = subprocess.run([sys.executable, "solutions/scripts/bench_encoder.py", "--tiny", "--rounds", "1",
                           "--steps", "1", "--device", "cpu", "--compile", "--no-peaks", "--runs", "/nonexistent"],
                          cwd=LAYOUT.root, capture_output=True, text=True, timeout=SAFETY_S, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "torch.compile on both" in proc.stdout and "throughput ratio ours / PyTorch's" in proc.stdout
    assert "no finished capstone runs under /nonexistent" in proc.stdout
    assert "peak tensor memory ratio: not measured" in proc.stdout and "not measured (--no-peaks)" in proc.stdout


def test_peak_tensor_bytes_adds_up_what_is_alive_at_once() -> None:
    import torch

    from course_lib.provided.bench import peak_bytes, peak_tensor_bytes
    mib = 2**20

    def two_at_once() -> float:
        a = torch.ones(mib // 4)             # 1 MiB
        b = a + 1                            # 1 MiB more while a lives
        del a
        c = b * 2                            # 1 MiB more while b lives (a is gone): never 3 at once
        return float(c.sum())

    assert abs(peak_tensor_bytes(two_at_once) - 2 * mib) < 0.1 * mib  # the real peak: two tensors alive
    assert peak_bytes(two_at_once) < 1.1 * mib  # what the encoder bench printed before: one operator's, not a peak


def test_the_textbook_forms_compute_what_the_reference_computes() -> None:
    """``bench_encoder.py --textbook`` times chapters 02 and 05 as first written: the same functions as the
    reference's cheaper forms (and as PyTorch's), or its ratio would compare two different models."""
    import torch

    from course_ref.attention import scaled_dot_product_attention
    bench = bench_encoder
    torch.manual_seed(0)
    norm = bench.LayerNorm(16)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.uniform_(-1, 1)
    x = torch.randn(3, 5, 16) * 4 + 2
    expected = torch.nn.functional.layer_norm(x, (16,), norm.weight, norm.bias)
    torch.testing.assert_close(bench.textbook_layer_norm(norm, x), expected, rtol=0, atol=2e-6)
    torch.testing.assert_close(norm(x), expected, rtol=0, atol=2e-6)  # the reference, as it is
    q, k, v = torch.randn(3, 2, 4, 5, 8).unbind(0)                       # (batch, heads, seq, d_k) each
    keep = torch.tensor([[True] * 5, [True, True, True, False, False]])[:, None, None, :]  # (batch, 1, 1, seq_k)
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    for attention in (bench.textbook_attention, scaled_dot_product_attention):
        torch.testing.assert_close(attention(q, k, v, mask=keep)[0], expected, rtol=0, atol=2e-6)
    torch.manual_seed(1)
    dropped = scaled_dot_product_attention(q, k, v, mask=keep, dropout_p=0.5)[1]  # the reference's own dropout
    plain = scaled_dot_product_attention(q, k, v, mask=keep)[1]
    kept = dropped != 0
    assert 0.4 < 1 - kept[plain != 0].float().mean().item() < 0.6   # about half of 160 weights dropped
    torch.testing.assert_close(dropped[kept], plain[kept] / 0.5)     # the rest divided by 1 - p


def test_a_peak_process_that_dies_costs_only_its_peak(monkeypatch) -> None:
    """The throughput is measured before the peaks: a peak process killed (here as for memory, -9) is reported
    as such in its row, and the other side's peak still comes back, instead of a traceback that loses both."""
    import argparse
    import subprocess

    bench = bench_encoder
    ours, theirs = bench.SIDES

    def run(command, **kwargs):
        if ours in command:
            return subprocess.CompletedProcess(command, -9, "", "")
        return subprocess.CompletedProcess(command, 0, '{"tensors": 2048, "process": 4096}\n', "")

    monkeypatch.setattr(bench.subprocess, "run", run)
    args = argparse.Namespace(preset="quick", device="cpu", threads=1, compile=True, textbook=False)
    peaks = bench.peaks_in_fresh_processes(args, [[3, 2]])
    assert peaks[theirs] == {"tensors": 2048, "process": 4096}
    assert isinstance(peaks[ours], str) and "signal 9" in peaks[ours] and "out of memory" in peaks[ours]
