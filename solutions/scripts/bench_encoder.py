"""Benchmark the course's encoder against PyTorch's, in one run: training throughput and peak memory.

    .venv/bin/python solutions/scripts/bench_encoder.py [--quick] [--device cpu|cuda] [--rounds 3]

Both sides are the same model: the reference ``Encoder`` (chapter 05, on chapters 02-03's attention)
and ``torch.nn.TransformerEncoder`` built from ``TransformerEncoderLayer`` with the same sizes, Post-LN,
ReLU, dropout 0.1, batch-first. One training step is forward on a padded batch (a padding mask, each
sequence a different length), a masked mean-square loss, backward and AdamW. The two alternate
``--rounds`` times; the script prints the median examples per second of each and the ratio
ours / PyTorch's (goal: at least 1.0). Peak memory is torch.profiler's CPU allocation peak of one
step on the CPU, ``torch.cuda.max_memory_allocated`` on a GPU. ``--compile`` compiles both sides with torch.compile
(the capstone's ``--compile``): the hand-written attention then gets the kernel fusion PyTorch's fused
attention has by construction. Sizes are the capstone's: ``--quick``
is its CPU model (d_model 128, 2 layers), the default its full model (d_model 256, 4 layers).

Time to beat the TF-IDF bar is not something a few timed steps can tell: it is read from the capstone's
own runs. With ``--runs DIR`` (default runs/capstone, or a JSON written by ``course capstone record``,
e.g. book/data/capstone_cpu_long.json), the script also prints, for each fine-tuning run there, the
training time until its valid accuracy first passed TF-IDF's (pretraining included), or that it never did.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Callable

import torch
from torch import Tensor, nn

from course_lib.provided.bench import peak_bytes
from course_lib.provided.capstone.report import record_runs
from course_ref.encoder import Encoder

SIZES = {"quick": dict(d_model=128, num_heads=4, d_ff=512, num_layers=2, batch=64, seq=128),
         "full": dict(d_model=256, num_heads=8, d_ff=1024, num_layers=4, batch=128, seq=256)}


def batch(size: dict, device: torch.device, seed: int = 0) -> tuple[Tensor, Tensor]:
    """Inputs (batch, seq, d_model) and keep (batch, seq): True on real tokens, lengths from seq/4 to seq."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(size["batch"], size["seq"], size["d_model"], generator=g)
    lengths = torch.randint(size["seq"] // 4, size["seq"] + 1, (size["batch"],), generator=g)
    keep = torch.arange(size["seq"])[None, :] < lengths[:, None]          # (batch, seq)
    return x.to(device), keep.to(device)


def ours(size: dict) -> tuple[nn.Module, Callable[[nn.Module, Tensor, Tensor], Tensor]]:
    model = Encoder(size["num_layers"], size["d_model"], size["num_heads"], size["d_ff"], dropout=0.1)
    return model, lambda m, x, keep: m(x, keep[:, None, None, :])       # mask (batch, 1, 1, seq)


def pytorch(size: dict) -> tuple[nn.Module, Callable[[nn.Module, Tensor, Tensor], Tensor]]:
    layer = nn.TransformerEncoderLayer(size["d_model"], size["num_heads"], size["d_ff"], dropout=0.1,
                                       batch_first=True, norm_first=False)
    model = nn.TransformerEncoder(layer, size["num_layers"], enable_nested_tensor=False)
    return model, lambda m, x, keep: m(x, src_key_padding_mask=~keep)   # PyTorch: True = ignore


def step_fn(build, size: dict, device: torch.device, compile: bool = False) -> tuple[Callable[[], None], int]:
    """One training step of a fresh, seeded model (torch.compile'd when asked), and its parameter count."""
    torch.manual_seed(0)
    model, call = build(size)
    model = model.to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    runner = torch.compile(model) if compile else model                  # compiles at its first call (warm-up)
    x, keep = batch(size, device)

    def step() -> None:
        out = call(runner, x, keep)                                         # (batch, seq, d_model)
        loss = (out.pow(2).mean(-1) * keep).sum() / keep.sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
    return step, sum(p.numel() for p in model.parameters())


def examples_per_second(step: Callable[[], None], n: int, examples: int) -> float:
    step()  # warm-up
    start = time.perf_counter()
    for _ in range(n):
        step()
    return n * examples / (time.perf_counter() - start)


def peak(step: Callable[[], None], device: torch.device) -> int:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        step()
        return torch.cuda.max_memory_allocated()
    return peak_bytes(step)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the capstone's CPU sizes")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5, help="training steps timed per round")
    parser.add_argument("--runs", default="runs/capstone", help="capstone runs (a folder, or a recorded JSON)")
    parser.add_argument("--compile", action="store_true", help="torch.compile both models (as `course capstone "
                        "--compile` does); compiling happens in the untimed warm-up step")
    args = parser.parse_args()
    device = torch.device(args.device)
    size = SIZES["quick" if args.quick else "full"]
    builds = {"ours (course_ref Encoder)": ours, "torch.nn.TransformerEncoder": pytorch}
    steps = {name: step_fn(build, size, device, args.compile) for name, build in builds.items()}
    rates: dict[str, list[float]] = {name: [] for name in builds}
    for _ in range(args.rounds):
        for name, (step, _) in steps.items():
            rates[name].append(examples_per_second(step, args.steps, size["batch"]))
    print(f"{'quick' if args.quick else 'full'} sizes {size} on {device} ({torch.get_num_threads()} threads), "
          f"{'torch.compile on both, ' if args.compile else ''}"
          f"torch {torch.__version__}; median of {args.rounds} rounds of {args.steps} steps")
    print(f"{'model':<30} {'parameters':>11} {'examples/s':>11} {'peak MiB':>9}")
    for name, (step, params) in steps.items():
        print(f"{name:<30} {params:>11,} {statistics.median(rates[name]):>11.1f} {peak(step, device) / 2**20:>9.1f}")
    ratio = statistics.median(rates[next(iter(builds))]) / statistics.median(rates["torch.nn.TransformerEncoder"])
    print(f"throughput ratio ours / PyTorch's = {ratio:.2f} (goal >= 1.0: {'met' if ratio >= 1.0 else 'NOT met'})")
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
    where = record["hardware"]["gpu"] or f"CPU, {record['hardware']['torch_threads']} threads"
    print(f"time to beat TF-IDF ({bar['valid_accuracy']:.1%} valid), runs recorded {record['recorded'][:10]} on {where}:")
    for run in record["finetune"]:
        seconds = run["seconds_to_beat_tfidf_valid"]
        past = (f"{seconds:.0f} s (step {run['beats_tfidf_valid_at_step']})" if seconds is not None else
                f"not beaten in {run['steps']} steps (best valid {max(a for _, a in run['curve']):.1%})")
        chosen = f", best-valid model {run['best_valid']['test_accuracy']:.1%}" if run.get("best_valid") else ""
        print(f"  {run['name']:<28} {past}; test {run['test_accuracy']:.1%} at the last step{chosen}")


if __name__ == "__main__":
    raise SystemExit(main())
