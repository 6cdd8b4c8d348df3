"""Benchmark the course's encoder against PyTorch's, in one run: training throughput and peak memory.

    .venv/bin/python solutions/scripts/bench_encoder.py [--quick | --preset cpu|full | --tiny] [--device cpu|cuda]
                                                        [--rounds 15] [--steps 5] [--compile] [--no-peaks]
                                                        [--runs DIR]

Both sides are the same model: the reference ``Encoder`` (chapter 05, on chapters 02-03's attention)
and ``torch.nn.TransformerEncoder`` built from ``TransformerEncoderLayer`` with the same sizes, Post-LN,
ReLU, dropout 0.1, batch-first. The sizes are the capstone's own (``models.SIZES`` and the preset's batch
size and ``max_len``: ``--quick`` is the CPU model, d_model 128, d_ff 256, 2 layers), and so are the
batches: the first bucketed batches of the train reviews, each as long as its longest review, with a
padding mask for the rest (the encoder's input is random: embeddings are not what is measured). One
training step is forward, a masked mean-square loss, backward and AdamW; on cuda under bfloat16
autocast, as the capstone trains.

**Throughput.** The two sides alternate ``--rounds`` times (ours first in even rounds, PyTorch's first in
odd ones), each timing ``--steps`` steps. Each round gives a ratio ours / PyTorch's from two measurements
made seconds apart, so a load that comes and goes on a shared machine moves both; the script prints the
median ratio and its interquartile range (goal: at least 1.0), and the same ratio per second of the
process's CPU time, which other processes' load moves less than wall time (with one thread).

**Peak memory.** Each side runs in a fresh process of its own (this script with ``--peak-of``): on cuda
``torch.cuda.max_memory_allocated`` over one training step; on the CPU the peak of the tensors alive during
one step (parameters, gradients, AdamW's state and activations) from the profiler's memory timeline, and
the process's peak resident memory (``ru_maxrss``, which includes PyTorch itself).

``--tiny`` measures a toy of the same two models (``TINY``: d_model 16, one layer, two batches of four
made-up lengths, no data read) in the same way: what the benchmark's tests run, so that their work is a
few seconds of CPU whatever the machine's load; its numbers say nothing about the capstone's speed.
``--no-peaks`` skips the peak-memory processes (each compiles again under ``--compile``).

``--compile`` compiles both sides with torch.compile (the capstone's ``--compile``) in an untimed warm-up.
``--textbook`` times ours as first written (LayerNorm with ``.mean()`` and a division, attention dividing the
scores and calling ``torch.nn.functional.dropout``): the same formulas, and what their cheaper forms in
chapters 02 and 05's reference buy.
With ``--runs DIR`` (default runs/capstone, or a JSON written by ``course capstone record``, e.g.
book/data/capstone_cpu_long.json), the script also prints, for each fine-tuning run there, the training time
until its valid accuracy first passed TF-IDF's (pretraining included), or that it never did.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import torch
from torch import Tensor, nn

from course_lib.provided.bench import peak_rss_bytes, peak_tensor_bytes
from course_lib.provided.capstone.batching import batch_order
from course_lib.provided.capstone.data import reviews
from course_lib.provided.capstone.models import SIZES
from course_lib.provided.capstone.report import record_runs
from course_lib.provided.capstone.stages import PRESETS
import course_ref.multihead
from course_ref.encoder import Encoder, LayerNorm

Build = Callable[[dict], tuple[nn.Module, Callable[[nn.Module, Tensor, Tensor], Tensor]]]


TINY = {"d_model": 16, "num_heads": 2, "d_ff": 32, "num_layers": 1, "batch": 4, "max_len": 6}
TINY_LENGTHS = [[6, 5, 3, 2], [6, 4, 2, 1]]  # one sequence length: torch.compile compiles once


def bench_size(preset: str) -> dict:
    """The sizes measured: the capstone preset's (``capstone_size``), or ``TINY`` for the preset "tiny"."""
    return dict(TINY) if preset == "tiny" else capstone_size(preset)


def capstone_size(preset: str) -> dict:
    """The capstone's transformer sizes of ``preset`` with its batch size and max_len."""
    size = PRESETS[preset]
    return {**SIZES["transformer"][size["size"]], "batch": size["batch_size"], "max_len": size["max_len"]}


def capstone_lengths(size: dict, count: int = 8) -> list[list[int]]:
    """The review lengths (at most max_len) of the first ``count`` bucketed train batches of the capstone."""
    lengths = [min(len(review.text), size["max_len"]) for review in reviews().train]
    return [[lengths[i] for i in group] for group in batch_order(lengths, size["batch"], seed=0, epoch=0)[:count]]


def capstone_batches(size: dict, device: torch.device, lengths: list[list[int]]) -> list[tuple[Tensor, Tensor]]:
    """Batches of those lengths: inputs (batch, seq, d_model) random, keep (batch, seq) True on real tokens."""
    g = torch.Generator().manual_seed(0)
    found = []
    for batch_lengths in lengths:
        real = torch.tensor(batch_lengths)                                        # (batch,)
        keep = torch.arange(int(real.max()))[None, :] < real[:, None]             # (batch, seq)
        x = torch.randn(len(real), keep.size(1), size["d_model"], generator=g)   # (batch, seq, d_model)
        found.append((x.to(device), keep.to(device)))
    return found


def ours(size: dict) -> tuple[nn.Module, Callable[[nn.Module, Tensor, Tensor], Tensor]]:
    model = Encoder(size["num_layers"], size["d_model"], size["num_heads"], size["d_ff"], dropout=0.1)
    return model, lambda m, x, keep: m(x, keep[:, None, None, :])       # mask (batch, 1, 1, seq)


def pytorch(size: dict) -> tuple[nn.Module, Callable[[nn.Module, Tensor, Tensor], Tensor]]:
    layer = nn.TransformerEncoderLayer(size["d_model"], size["num_heads"], size["d_ff"], dropout=0.1,
                                       batch_first=True, norm_first=False)
    model = nn.TransformerEncoder(layer, size["num_layers"], enable_nested_tensor=False)
    return model, lambda m, x, keep: m(x, src_key_padding_mask=~keep)   # PyTorch: True = ignore


def textbook_layer_norm(self: LayerNorm, x: Tensor) -> Tensor:
    """``--textbook``: the formula as first written, with .mean() and a division by sqrt(var + eps), which
    chapter 05's reference had before (the same values to within float32 rounding). x (..., d_model)."""
    mean = x.mean(dim=-1, keepdim=True)                                    # (..., 1)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)                     # (..., 1), biased
    return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias  # (..., d_model)


def textbook_attention(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None,
                       dropout_p: float = 0.0) -> tuple[Tensor, Tensor]:
    """``--textbook``: attention as first written, the scores divided by sqrt(d_k) and
    torch.nn.functional.dropout on the weights, which chapter 02's reference had before."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))     # (..., seq_q, seq_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)                                # (..., seq_q, seq_k)
    if dropout_p > 0.0:
        weights = torch.nn.functional.dropout(weights, p=dropout_p)
    return weights @ value, weights                                        # (..., seq_q, d_v)


SIDES: dict[str, Build] = {"ours (course_ref Encoder)": ours, "torch.nn.TransformerEncoder": pytorch}


def step_fn(build: Build, size: dict, device: torch.device, lengths: list[list[int]], compile: bool = False
            ) -> tuple[Callable[[], int], int]:
    """One training step of a fresh, seeded model on the next capstone batch (returns its examples), and the
    parameter count. torch.compile'd when asked; under bfloat16 autocast on cuda."""
    torch.manual_seed(0)
    model, call = build(size)
    model = model.to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    runner = torch.compile(model, dynamic=True) if compile else model   # compiles at its first call (warm-up)
    batches, turn = capstone_batches(size, device, lengths), [0]
    autocast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if device.type == "cuda" else contextlib.nullcontext

    def step() -> int:
        x, keep = batches[turn[0] % len(batches)]
        turn[0] += 1
        with autocast():
            out = call(runner, x, keep)                                     # (batch, seq, d_model)
            loss = (out.float().pow(2).mean(-1) * keep).sum() / keep.sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        return x.size(0)
    return step, sum(p.numel() for p in model.parameters())


def examples_per_second(step: Callable[[], int], n: int) -> tuple[float, float]:
    """Examples per second of wall time, and per second of this process's CPU time, over ``n`` steps."""
    start, cpu_start = time.perf_counter(), time.process_time()
    examples = sum(step() for _ in range(n))
    return examples / (time.perf_counter() - start), examples / (time.process_time() - cpu_start)


def peak_of(name: str, preset: str, device: torch.device, lengths: list[list[int]], compile: bool) -> dict[str, int]:
    """In this (fresh) process: the peak memory of one training step of side ``name``, after a warm-up step."""
    step, _ = step_fn(SIDES[name], bench_size(preset), device, lengths, compile)
    step()  # warm-up: AdamW's state exists from now on, as in training
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        step()
        return {"tensors": torch.cuda.max_memory_allocated(), "process": 0}
    step()
    process = peak_rss_bytes()  # before the profiler, whose own records would count
    return {"tensors": peak_tensor_bytes(step), "process": process}


def peaks_in_fresh_processes(args: argparse.Namespace, lengths: list[list[int]]) -> dict[str, dict[str, int] | str]:
    """Each side's peaks, measured by this script in a new process (given the batch lengths: it reads no data),
    or why that process gave none: the throughput measured already is printed either way."""
    found: dict[str, dict[str, int] | str] = {}
    for name in SIDES:
        command = [sys.executable, "-m", "course_admin.measure.bench_encoder", "--peak-of", name,
                   "--size-of", args.preset, "--device", args.device, "--threads", str(args.threads), "--lengths", json.dumps(lengths),
                   *(["--compile"] if args.compile else []), *(["--textbook"] if args.textbook else [])]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode == 0:
            found[name] = json.loads(done.stdout.strip().splitlines()[-1])
        else:  # e.g. killed for memory: the profiler's timeline of a compiled full-size step is large
            why = f"killed by signal {-done.returncode}" if done.returncode < 0 else f"exit {done.returncode}"
            tail = done.stderr.strip().splitlines()[-1:] or [""]
            found[name] = f"not measured: its process ended ({why}{', out of memory?' if done.returncode == -9 else ''})" \
                          + (f": {tail[0][:200]}" if tail[0] else "")
    return found


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """(first quartile, median, third quartile); one value gives itself three times."""
    if len(values) < 2:
        return values[0], values[0], values[0]
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, median, q3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the capstone's quick (CPU) sizes: --preset quick")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="full", help="the capstone preset's sizes")
    parser.add_argument("--tiny", action="store_true", help="a toy size and made-up lengths (the tests' run): "
                        "measured and reported the same way, seconds of work, nothing to read about speed")
    parser.add_argument("--no-peaks", action="store_true", help="skip the peak-memory processes")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--rounds", type=int, default=15, help="alternating rounds (the ratio's spread needs ~10+)")
    parser.add_argument("--steps", type=int, default=5, help="training steps timed per side and round")
    parser.add_argument("--runs", default="runs/capstone", help="capstone runs (a folder, or a recorded JSON)")
    parser.add_argument("--compile", action="store_true", help="torch.compile both models (as `course capstone "
                        "--compile` does); compiling happens in the untimed warm-up step")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (default 1, as the capstone trains)")
    parser.add_argument("--textbook", action="store_true", help="time our encoder as first written (LayerNorm "
                        "with .mean() and a division; attention dividing the scores, with F.dropout), patched in "
                        "this process only: what chapters 02 and 05's cheaper forms of the same formulas buy")
    parser.add_argument("--peak-of", choices=sorted(SIDES), help=argparse.SUPPRESS)  # the fresh process per side
    parser.add_argument("--size-of", choices=["tiny", *sorted(PRESETS)], help=argparse.SUPPRESS)  # and its sizes
    parser.add_argument("--lengths", help=argparse.SUPPRESS)                           # and its batches' lengths
    args = parser.parse_args()
    args.preset = "tiny" if args.tiny else "quick" if args.quick else (args.size_of or args.preset)
    device = torch.device(args.device)
    torch.set_num_threads(args.threads)
    if args.textbook:
        LayerNorm.forward = textbook_layer_norm  # type: ignore[method-assign]
        course_ref.multihead.scaled_dot_product_attention = textbook_attention  # what MultiHeadAttention calls
    if args.peak_of:
        print(json.dumps(peak_of(args.peak_of, args.preset, device, json.loads(args.lengths), args.compile)))
        return 0
    size = bench_size(args.preset)
    lengths = TINY_LENGTHS if args.tiny else capstone_lengths(size)
    steps = {name: step_fn(build, size, device, lengths, args.compile) for name, build in SIDES.items()}
    for step, _ in steps.values():
        for _ in range(len(lengths) if args.compile else 1):
            step()  # warm-up, and compilation for each batch length
    rates: dict[str, list[float]] = {name: [] for name in SIDES}
    cpu_rates: dict[str, list[float]] = {name: [] for name in SIDES}
    for round_ in range(args.rounds):
        for name in (list(SIDES) if round_ % 2 == 0 else list(SIDES)[::-1]):
            wall, cpu = examples_per_second(steps[name][0], args.steps)
            rates[name].append(wall)
            cpu_rates[name].append(cpu)
    peaks = ({name: "not measured (--no-peaks)" for name in SIDES} if args.no_peaks else
             peaks_in_fresh_processes(args, lengths))
    print(f"{'toy (--tiny)' if args.tiny else 'capstone ' + args.preset} sizes {size} on {device} ({args.threads} thread{'s' * (args.threads != 1)}"
          f"{', bf16 autocast' if device.type == 'cuda' else ''}), {'torch.compile on both, ' if args.compile else ''}"
          f"torch {torch.__version__}; {args.rounds} rounds of {args.steps} steps, "
          f"{'made-up lengths' if args.tiny else 'real review lengths'}"
          f"{'; ours as first written (--textbook)' if args.textbook else ''}")
    memory = "peak MiB (cuda)" if device.type == "cuda" else "tensors MiB  process MiB"
    print(f"{'model':<30} {'parameters':>11} {'examples/s':>11} {memory}")
    for name, (_, params) in steps.items():
        peak = peaks[name]
        mib = (f"  {peak}" if isinstance(peak, str) else
               f"{peak['tensors'] / 2**20:>9.1f}" + (f"  {peak['process'] / 2**20:>11.1f}" if peak["process"] else ""))
        print(f"{name:<30} {params:>11,} {statistics.median(rates[name]):>11.1f} {mib}")
    ratios = [a / b for a, b in zip(*rates.values())]
    q1, median, q3 = quartiles(ratios)
    print(f"throughput ratio ours / PyTorch's = {median:.2f} (interquartile range {q1:.2f}-{q3:.2f} over "
          f"{len(ratios)} rounds; goal >= 1.0: {'met' if median >= 1.0 else 'NOT met'})")
    c1, cpu_median, c3 = quartiles([a / b for a, b in zip(*cpu_rates.values())])
    print(f"per CPU second (what other processes' load moves least) = {cpu_median:.2f} "
          f"(interquartile range {c1:.2f}-{c3:.2f})")
    ours_peak, their_peak = (peaks[name] for name in SIDES)
    if isinstance(ours_peak, dict) and isinstance(their_peak, dict):
        print(f"peak tensor memory ratio ours / PyTorch's = {ours_peak['tensors'] / their_peak['tensors']:.2f}")
    else:
        print("peak tensor memory ratio: not measured (see the table)")
    time_to_bar(Path(args.runs))
    return 0


def time_to_bar(runs: Path) -> None:
    """Each recorded fine-tuning run's training time to pass the TF-IDF bar on valid (see the docstring)."""
    if runs.suffix == ".json" and runs.is_file():
        record = json.loads(runs.read_text(encoding="utf-8"))
    elif any(runs.glob("finetune-*/summary.json")):
        record = record_runs(runs)
    else:
        print(f"time to beat TF-IDF: no finished capstone runs under {runs} (run `course capstone finetune`, "
              "or pass --runs with a folder of runs or a recorded JSON)")
        return
    bar = next(b for b in record["baselines"] if b["name"].lower().startswith("tf-idf"))
    threads = record["hardware"]["torch_threads"]
    where = record["hardware"]["gpu"] or f"CPU, {threads} thread{'s' * (threads != 1)}"
    print(f"time to beat TF-IDF ({bar['valid_accuracy']:.1%} valid), runs recorded {record['recorded'][:10]} on {where}:")
    for run in record["finetune"]:
        seconds = run["seconds_to_beat_tfidf_valid"]
        past = (f"{seconds:.0f} s (step {run['beats_tfidf_valid_at_step']})" if seconds is not None else
                f"not beaten in {run['steps']} steps (best valid {max(a for _, a in run['curve']):.1%})" if run["curve"]
                else f"ensemble of {len(run.get('members', []))}, valid {run['valid_accuracy']:.1%}, "
                     f"{run['train_seconds']:.0f} s of training")
        chosen = f", best-valid model {run['best_valid']['test_accuracy']:.1%}" if run.get("best_valid") else ""
        which = "(the ensemble of best-valid members)" if run.get("members") else "at the last step"
        print(f"  {run['name']:<28} {past}; test {run['test_accuracy']:.1%} {which}{chosen}")


if __name__ == "__main__":
    raise SystemExit(main())
