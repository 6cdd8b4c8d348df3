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
from ..i18n import _
from ..runtime import pick_device, process_context
from ..training import to_device
from .batching import Example, batch_order, collate, encode_reviews
from .data import reviews
from .report import cached_baselines, comparison_table
from .handin import weights_of
from .stages import finetune, make_classifier, run_folder, say, settings
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
        raise SystemExit(_("no trained model in {folder}: run `course capstone finetune` with the same options "
                           "first").format(folder=folder))
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


def unverifiable(run: dict[str, Any], args: argparse.Namespace) -> list[str]:
    """Why `course verify` (solutions/course_admin/grading/verify.py, ``recipe``) will mark this run's hand-in
    "not verifiable", one notice a reason, said before it trains: a start from a pretraining run (the hand-in
    does not carry it), an ensemble (verify trains one run again), a device other than the CPU (verify trains
    on the grader's CPU). The trained model's points are measured on the weights and do not depend on it."""
    found = []
    if getattr(args, "pretrained", None):
        found.append(_("notice: this run starts from a pretrained encoder (--pretrained), and its hand-in does not "
                       "include the pretraining run, so `course verify` cannot train it again: the hand-in will be "
                       "marked \"not verifiable\" (the trained model's points do not depend on it; for a run that "
                       "can be verified, fine-tune one seed from scratch on a CPU)"))
    if run["seeds"] > 1:
        found.append(_("notice: this run is an ensemble of {seeds} seeds (--seeds), and `course verify` trains one "
                       "run again, not an ensemble: the hand-in will be marked \"not verifiable\" (the trained "
                       "model's points do not depend on it; for a run that can be verified, add --seeds 1)"
                       ).format(seeds=run["seeds"]))
    device = pick_device(args.device)
    if device.type != "cpu":
        found.append(_("notice: this run trains on {device}, and `course verify` trains it again on the grader's "
                       "CPU: the hand-in will be marked \"not verifiable\" (the trained model's points do not "
                       "depend on it; for a run that can be verified, train on a CPU with --device cpu)"
                       ).format(device=device.type))
    return found


def finetune_command(args: argparse.Namespace) -> int:
    """``course capstone finetune``: one run, or with ``--seeds K`` (or a preset's) K runs and their ensemble;
    first, why `course verify` could not verify it, if it could not."""
    run = settings(args, "finetune")
    for notice in unverifiable(run, args):
        say(notice)
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
    rows = [(_("{name} (best valid, step {step})").format(name=f"{folder.name}/seed-{m['seed']}", step=m["step"]),
             m["valid_accuracy"], m["test_accuracy"]) for m in summary["members"]]
    rows.append((_("{name}: ensemble of {count}").format(name=folder.name, count=len(members)), accuracy["valid"],
                 accuracy["test"]))
    print(comparison_table(cached_baselines(Path(args.out)), rows))
    print(_("{train:.0f} s of training in all ({cpu:.0f} s of CPU); summary in {path}").format(
        train=summary["train_seconds"], cpu=summary["train_cpu_seconds"], path=folder / "summary.json"))
    return 0
