"""`course capstone finetune --seeds K`: K classifiers from K seeds, their probabilities averaged.

    course capstone finetune --model transformer --seeds 5      # runs/capstone/finetune-transformer-cpu/seed-0 ... seed-4

Each member is an ordinary fine-tuning run in a folder of its own (``seed-N/``: checkpoints, best.pt,
metrics, summary; a killed member resumes like any run, a finished one is not trained again). Each
member's model is the one of its best valid accuracy (``best.pt``, chosen on valid alone); the ensemble
averages their predicted probabilities, p(label | review) = (1/K) Σ_k p_k(label | review), and predicts
the most probable label. Members differ only in their seed: initial weights, batch order and dropout.
"""
from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import nn

from ..checkpoints import latest_checkpoint
from ..runtime import pick_device, process_context
from ..training import to_device
from .batching import Example, batch_order, collate, encode_reviews
from .data import reviews
from .report import cached_baselines, comparison_table
from .handin import weights_of
from .stages import finetune, make_classifier, run_folder, settings
from .vocab import CharVocab


def predict(model: nn.Module, examples: Sequence[Example], pad_id: int, device: torch.device,
            batch_size: int = 256) -> torch.Tensor:
    """Probabilities (examples, classes) of ``model`` for each example, in the given order."""
    model.eval()
    found: list[torch.Tensor | None] = [None] * len(examples)
    with torch.no_grad():
        for group in batch_order([len(ids) for ids, _ in examples], batch_size, shuffle=False):
            batch = to_device(collate([examples[i] for i in group], pad_id), device)
            probs = model(batch.tokens, batch.tokens != pad_id).float().softmax(-1).cpu()  # (batch, classes)
            for row, index in enumerate(group):
                found[index] = probs[row]
    return torch.stack(found)  # type: ignore[arg-type]                              # (examples, classes)


def member_probabilities(folder: Path, device: torch.device) -> dict[str, torch.Tensor]:
    """The best-valid model of the fine-tuning run in ``folder``: its probabilities on valid and test."""
    found = latest_checkpoint(folder / "checkpoints")
    if found is None:
        raise SystemExit(f"no trained model in {folder}: run `course capstone finetune` with the same options first")
    run, vocab = found[1]["settings"]["run"], CharVocab.load(folder / "vocab.json")
    state = weights_of(folder)  # the best valid accuracy's, else the newest checkpoint's
    model = make_classifier(run, vocab, state.get("embed.keys"))
    model.load_state_dict(state)
    model.to(device)
    corpus = reviews()
    return {split: predict(model, encode_reviews(corpus.split(split), vocab, run["max_len"]), vocab.pad_id, device)
            for split in ("valid", "test")}


def ensemble_accuracy(probabilities: Sequence[dict[str, torch.Tensor]]) -> dict[str, float]:
    """Accuracy on valid and test of the mean of the members' probabilities."""
    corpus = reviews()
    accuracy = {}
    for split in ("valid", "test"):
        labels = torch.tensor([review.label for review in corpus.split(split)])   # (examples,)
        mean = torch.stack([p[split] for p in probabilities]).mean(0)              # (examples, classes)
        accuracy[split] = float((mean.argmax(-1) == labels).float().mean())
    return accuracy


def finetune_command(args: argparse.Namespace) -> int:
    """``course capstone finetune``: one run, or with ``--seeds K`` (or a preset's) K runs and their ensemble."""
    run = settings(args, "finetune")
    if run["seeds"] <= 1:
        finetune(args)
        return 0
    start, folder = time.perf_counter(), run_folder(args, "finetune")
    members = []
    for seed in range(args.seed, args.seed + run["seeds"]):
        member_args = copy.copy(args)
        member_args.seed, member_args.seeds = seed, 1
        members.append((folder / f"seed-{seed}", finetune(member_args, folder / f"seed-{seed}")))
    if not process_context().is_main:
        return 0
    device = pick_device(args.device)
    probabilities = [member_probabilities(path, device) for path, _ in members]
    accuracy = ensemble_accuracy(probabilities)
    summaries = [summary or json.loads((path / "summary.json").read_text(encoding="utf-8")) for path, summary in members]
    summary: dict[str, Any] = {
        **run, "members": [{"seed": s["seed"], "valid_accuracy": s["best_valid"]["valid_accuracy"],
                            "test_accuracy": s["best_valid"]["test_accuracy"], "step": s["best_valid"]["step"]}
                           for s in summaries],
        "valid_accuracy": accuracy["valid"], "test_accuracy": accuracy["test"],
        "parameters": summaries[0]["parameters"], "vocab_size": summaries[0]["vocab_size"],
        "threads": summaries[0].get("threads"),
        "train_seconds": sum(s["train_seconds"] for s in summaries),
        "train_cpu_seconds": sum(s.get("train_cpu_seconds", 0.0) for s in summaries),
        "wall_seconds": time.perf_counter() - start}
    summary["examples_per_second"] = sum(s["examples_per_second"] * s["train_seconds"]
                                         for s in summaries) / max(summary["train_seconds"], 1e-9)
    (folder / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    rows = [(f"{folder.name}/seed-{m['seed']} (best valid, step {m['step']})", m["valid_accuracy"], m["test_accuracy"])
            for m in summary["members"]]
    rows.append((f"{folder.name}: ensemble of {len(members)}", accuracy["valid"], accuracy["test"]))
    print(comparison_table(cached_baselines(Path(args.out)), rows))
    print(f"{summary['train_seconds']:.0f} s of training in all ({summary['train_cpu_seconds']:.0f} s of CPU); "
          f"summary in {folder / 'summary.json'}")
    return 0
