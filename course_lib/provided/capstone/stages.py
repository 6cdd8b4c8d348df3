"""The two training stages of `course capstone`: fine-tuning a classifier, masked-LM pretraining.

Both build their data, model and settings from the command's options, then hand over to
``course_lib.provided.training.train``; ``run.py`` parses the options and calls them.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..checkpoints import latest_checkpoint
from ..i18n import _
from ..runtime import ProcessContext, pick_device, process_context, seed_everything, shard_groups
from ..training import TrainConfig, to_device, train, warmup_cosine
from .batching import Batch, Example, batch_order, collate, encode_reviews
from .data import pretraining_text, reviews
from .mlm import IGNORE_INDEX, MaskedLM, MLMBatch, mlm_batches, pretraining_chunks
from .models import add_bigrams, build_classifier
from .report import cached_baselines, comparison_table, read_metrics
from .vocab import CharVocab, bigram_keys

PRESETS: dict[str, dict[str, Any]] = {  # steps are optimizer steps; 217 batches of 64 make one epoch of train
    "quick": dict(size="quick", max_len=128, batch_size=64, steps=600, pretrain_steps=400, eval_every=200,
                  checkpoint_every=100,  # a kill on a shared 2-core machine loses well under a minute
                  warmup=60, lr={"lstm": 2e-3, "transformer": 1e-3}, dropout=0.1, bigrams=0,
                  pretrain_text="news+reviews", seeds=1),
    # cpu: the CPU full mode, under an hour on 2 cores (book/08_capstone.md): bigram inputs, 5 seeds averaged
    "cpu": dict(size="quick", max_len=128, batch_size=64, steps=600, pretrain_steps=6000, eval_every=100,
                warmup=60, lr={"lstm": 2e-3, "transformer": 1e-3}, dropout=0.1, bigrams=5,
                pretrain_text="news+reviews", seeds=5),
    "full": dict(size="full", max_len=256, batch_size=128, steps=4000, pretrain_steps=20000, eval_every=500,
                 warmup=400, lr={"lstm": 1e-3, "transformer": 5e-4}, dropout=0.1, bigrams=0,
                 pretrain_text="news+reviews", seeds=1),
}
FOLDER_SUFFIX = {"quick": "-quick", "cpu": "-cpu", "full": ""}
CPU_THREADS = 1  # the default on a CPU: small models gain little from a second thread, and lose much on shared cores


def say(*parts: object) -> None:
    """Print on rank 0 only (every rank runs this command under torchrun)."""
    if process_context().is_main:
        print(*parts, flush=True)


def preset_name(args: argparse.Namespace) -> str:
    """``--quick``: quick; otherwise ``--preset``, by default "full" (GPU sizes) with a GPU and "cpu" without."""
    if args.quick:
        return "quick"
    if getattr(args, "preset", None):
        return args.preset
    return "full" if pick_device(args.device).type == "cuda" else "cpu"


def settings(args: argparse.Namespace, stage: str) -> dict[str, Any]:
    """The preset of ``--quick``, ``--preset`` or the device, overridden by the options given."""
    name = preset_name(args)
    preset = PRESETS[name]
    steps = args.steps or preset["pretrain_steps" if stage == "pretrain" else "steps"]
    option = lambda key: preset[key] if getattr(args, key, None) is None else getattr(args, key)  # noqa: E731
    explicit = getattr(args, "bigrams", None) is not None
    bigrams = option("bigrams") if args.model == "transformer" or explicit else 0  # a preset's: the transformer's
    return {"stage": stage, "model": args.model, "preset": name, "size": preset["size"],
            "max_len": preset["max_len"], "batch_size": args.batch_size or preset["batch_size"], "steps": steps,
            "dropout": option("dropout"), "lr": args.lr or preset["lr"].get(args.model, 1e-3),
            "warmup": min(preset["warmup"], steps // 10 + 1), "eval_every": args.eval_every or preset["eval_every"],
            "checkpoint_every": preset.get("checkpoint_every"),
            "seed": args.seed, "impl": getattr(args, "impl", "learner"), "bigrams": bigrams,
            "pretrain_text": option("pretrain_text"), "seeds": option("seeds")}


def cpu_threads(args: argparse.Namespace, folder: Path) -> int | None:
    """Threads for torch on the CPU: ``--threads``, else those of the run being resumed, else ``CPU_THREADS``.

    None on a GPU (the device does the work). The count is saved with the run's settings: CPU results
    depend on it, so a resume keeps the saved count and refuses another one given explicitly.
    """
    if pick_device(args.device).type != "cpu":
        return args.threads
    if args.threads:
        return args.threads
    found = latest_checkpoint(folder / "checkpoints")
    saved = found[1].get("settings", {}).get("train", {}).get("threads") if found else None
    return saved or CPU_THREADS


BEST_FILE = "best.pt"  # the fine-tuned weights of the best valid accuracy, beside checkpoints/


def best_so_far(folder: Path) -> float:
    """The valid accuracy of ``folder``'s best.pt, or -1 when there is none (or it does not load)."""
    try:
        return float(torch.load(Path(folder) / BEST_FILE, map_location="cpu", weights_only=True)["valid_accuracy"])
    except Exception:  # noqa: BLE001 - absent or damaged: any evaluation beats it
        return -1.0


def run_folder(args: argparse.Namespace, stage: str) -> Path:
    return Path(args.out) / f"{stage}-{args.model}{FOLDER_SUFFIX[preset_name(args)]}"


def make_classifier(run: dict[str, Any], vocab: CharVocab, keys: Sequence[int] | torch.Tensor | None) -> nn.Module:
    """The run's classifier, freshly initialised; with bigram inputs when ``keys`` are given."""
    model = build_classifier(run["model"], len(vocab), vocab.pad_id, run["size"], run["max_len"], run["dropout"],
                             impl=run.get("impl", "learner"))
    return model if keys is None else add_bigrams(model, keys, len(vocab), vocab.pad_id)


def train_config(run: dict[str, Any], args: argparse.Namespace, **extra: Any) -> TrainConfig:
    return TrainConfig(steps=run["steps"], lr=run["lr"], eval_every=run["eval_every"],
                       checkpoint_every=min(run["eval_every"], run.get("checkpoint_every") or run["eval_every"]),
                       seed=run["seed"], compile=args.compile,
                       progress=not args.no_progress, threads=run.get("threads"), **extra)


def score(model: nn.Module, examples: Sequence[Example], pad_id: int, device: torch.device,
          batch_size: int = 256) -> tuple[float, float, list[float]]:
    """Accuracy, mean loss, and each example's probability of its true label (in the given order)."""
    was_training = model.training
    model.eval()
    correct, loss_sum, order = 0, 0.0, batch_order([len(ids) for ids, _ in examples], batch_size, shuffle=False)
    true_prob = [0.0] * len(examples)
    with torch.no_grad():
        for group in order:  # sorted by length: least padding
            batch = to_device(collate([examples[i] for i in group], pad_id), device)
            logits = model(batch.tokens, batch.tokens != pad_id).float()            # (batch, classes)
            loss_sum += float(F.cross_entropy(logits, batch.labels, reduction="sum"))
            correct += int((logits.argmax(-1) == batch.labels).sum())
            probs = logits.softmax(-1).gather(1, batch.labels[:, None])[:, 0].tolist()  # (batch,)
            for index, prob in zip(group, probs):
                true_prob[index] = prob
    model.train(was_training)
    return correct / len(examples), loss_sum / len(examples), true_prob


def pretrained_encoder(folder: Path) -> dict[str, torch.Tensor]:
    """The encoder weights of the pretraining run in ``folder`` (its newest checkpoint), by the classifier's names."""
    found = latest_checkpoint(Path(folder) / "checkpoints")
    if found is None:
        raise SystemExit(_("--pretrained {folder}: no checkpoint there; run `course capstone pretrain` first").format(
            folder=folder))
    return {k.removeprefix("encoder."): v for k, v in found[1]["model"].items() if k.startswith("encoder.")}


def load_pretrained(model: nn.Module, encoder: dict[str, torch.Tensor], folder: Path) -> None:
    """Copy the pretrained ``encoder`` weights into ``model`` (same model, same size)."""
    try:
        model.load_state_dict(encoder)
    except RuntimeError as err:
        raise SystemExit(_("--pretrained {folder}: its encoder does not fit this model (same --model, preset and "
                           "--bigrams as the pretraining run?): {error}").format(folder=folder, error=err)) from None


def classifier_vocab(run: dict[str, Any], texts: Sequence[str]) -> tuple[CharVocab, list[int] | None]:
    """A vocabulary of ``texts`` (training text only) and, when the run asks for them, its bigram keys."""
    vocab = CharVocab.build(texts)
    return vocab, (bigram_keys(texts, vocab, run["bigrams"]) if run["bigrams"] else None)


def describe(run: dict[str, Any], device: torch.device) -> str:
    """Where the run trains: the device, and on a CPU the threads (saved with the settings)."""
    if not run.get("threads"):
        return str(device)
    text = _("{device}, {count} thread (--threads)") if run["threads"] == 1 else \
        _("{device}, {count} threads (--threads)")
    return text.format(device=device, count=run["threads"])


def finetune(args: argparse.Namespace, folder: Path | None = None, table: bool = True) -> dict[str, Any] | None:
    """Fine-tune one classifier into ``folder`` (default: the run folder); its summary (None on ranks other than 0).
    ``table``: print it beside the baselines at the end (fitted once if not cached in ``--out``)."""
    start, run = time.perf_counter(), settings(args, "finetune")
    folder = folder or run_folder(args, "finetune")
    run["threads"] = cpu_threads(args, folder)
    corpus = reviews()
    if args.pretrained:
        vocab = CharVocab.load(Path(args.pretrained) / "vocab.json")
        encoder = pretrained_encoder(Path(args.pretrained))
        keys = encoder.get("embed.keys")
        run["pretrained"] = str(Path(args.pretrained).resolve())
        run["bigrams"] = "pretrained" if keys is not None else 0
    else:
        vocab, keys = classifier_vocab(run, [review.text for review in corpus.train])
    train_set, valid_set, test_set = (encode_reviews(split, vocab, run["max_len"])
                                      for split in (corpus.train, corpus.valid, corpus.test))
    seed_everything(run["seed"])
    model = make_classifier(run, vocab, keys)
    if args.pretrained:
        load_pretrained(model, encoder, Path(args.pretrained))
    run["vocab_size"], run["parameters"] = len(vocab), sum(p.numel() for p in model.parameters())
    if process_context().is_main:
        folder.mkdir(parents=True, exist_ok=True)
        vocab.save(folder / "vocab.json")
    say(_("finetune {model} ({parameters:,} parameters) on {reviews:,} reviews, {steps} steps of {batch}, {preset} "
          "preset, on {where} -> {folder}").format(
        model=run["model"], parameters=run["parameters"], reviews=len(train_set), steps=run["steps"],
        batch=run["batch_size"], preset=run["preset"], where=describe(run, pick_device(args.device)), folder=folder))
    lengths = [len(ids) for ids, _ in train_set]

    def epoch_batches(epoch: int, ctx: ProcessContext) -> Iterator[Batch]:
        for group in shard_groups(batch_order(lengths, run["batch_size"], run["seed"], epoch), ctx):
            yield collate([train_set[i] for i in group], vocab.pad_id)

    def loss_fn(net: nn.Module, batch: Batch) -> tuple[torch.Tensor, int]:
        logits = net(batch.tokens, batch.tokens != vocab.pad_id)                   # (batch, classes)
        return F.cross_entropy(logits.float(), batch.labels), len(batch.labels)

    best_file = folder / BEST_FILE
    if process_context().is_main and latest_checkpoint(folder / "checkpoints") is None:
        best_file.unlink(missing_ok=True)  # a fresh run: an earlier run's best is not this one's

    best_valid = [best_so_far(folder)]  # read once: a resumed run goes on from its saved best

    def evaluate(net: nn.Module, device: torch.device) -> dict[str, float]:
        accuracy, loss, _probs = score(net, valid_set, vocab.pad_id, device)
        if accuracy > best_valid[0]:  # the weights of the best valid accuracy yet, for model selection
            torch.save({"valid_accuracy": accuracy, "model": net.state_dict()}, best_file.with_suffix(".part"))
            best_file.with_suffix(".part").replace(best_file)
            best_valid[0] = accuracy
        return {"valid_accuracy": accuracy, "valid_loss": loss}

    result = train(model, loss_fn, epoch_batches, train_config(run, args), evaluate=evaluate, out=folder,
                   schedule=warmup_cosine(run["warmup"], run["steps"]), device=args.device, run_config=run)
    if not result.is_main:
        return None
    device = next(result.model.parameters()).device
    if device.type == "cpu" and "valid_accuracy" in result.last_eval:  # the last step's, as evaluated (fp32 there)
        valid_accuracy = result.last_eval["valid_accuracy"]
    else:  # on a GPU the evaluation ran under bf16 autocast: scored again in float32, as test is
        valid_accuracy = score(result.model, valid_set, vocab.pad_id, device)[0]
    test_accuracy = score(result.model, test_set, vocab.pad_id, device)[0]
    summary = {**run, "device": str(device), "valid_accuracy": valid_accuracy, "test_accuracy": test_accuracy,
               "resumed_from": result.resumed_from, "train_seconds": result.train_seconds,
               "train_cpu_seconds": result.cpu_seconds, "examples_per_second": result.examples_per_second,
               "wall_seconds": time.perf_counter() - start}
    models = [(_("{name} (this run, last step)").format(name=folder.name), valid_accuracy, test_accuracy)]
    if best_file.is_file():  # chosen on valid alone; its test accuracy is reported, never used to choose
        best = torch.load(best_file, map_location=device, weights_only=True)
        step = next((r["step"] for r in read_metrics(folder / "metrics.jsonl")
                     if r.get("valid_accuracy") == best["valid_accuracy"]), None)
        if step == result.step and best["valid_accuracy"] == valid_accuracy and device.type == "cpu":
            best_test = test_accuracy  # the last step's weights, scored on test above
        else:
            result.model.load_state_dict(best["model"])
            best_test = score(result.model, test_set, vocab.pad_id, device)[0]
        summary["best_valid"] = {"step": step, "valid_accuracy": best["valid_accuracy"], "test_accuracy": best_test}
        models.append((_("{name} (best valid, step {step})").format(name=folder.name, step=step),
                       best["valid_accuracy"], best_test))
    (folder / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    if table:
        print(comparison_table(cached_baselines(Path(args.out)), models))
    resumed = _(", resumed from step {step}").format(step=result.resumed_from) if result.resumed_from else ""
    print(_("{train:.0f} s of training for the whole run ({speed:.0f} examples/s, {cpu:.0f} s of CPU), {wall:.0f} s "
            "for this command{resumed}; summary in {path}").format(
        train=result.train_seconds, speed=result.examples_per_second, cpu=result.cpu_seconds,
        wall=summary["wall_seconds"], resumed=resumed, path=folder / "summary.json"))
    return summary


def pretrain(args: argparse.Namespace) -> int:
    run, folder = settings(args, "pretrain"), run_folder(args, "pretrain")
    run["threads"] = cpu_threads(args, folder)
    text = pretraining_text()
    lines = list(text.lines if run["pretrain_text"] == "news+reviews" else text.reviews)
    vocab, keys = classifier_vocab(run, lines)  # news characters (and pairs) get ids too
    chunks = pretraining_chunks(lines, vocab, run["max_len"])
    held_out, train_chunks = chunks[::100], [c for i, c in enumerate(chunks) if i % 100]
    seed_everything(run["seed"])
    mlm = MaskedLM(make_classifier(run, vocab, keys), len(vocab))
    run["vocab_size"], run["parameters"] = len(vocab), sum(p.numel() for p in mlm.parameters())
    if process_context().is_main:
        folder.mkdir(parents=True, exist_ok=True)
        vocab.save(folder / "vocab.json")
    say(_("pretrain {model} ({parameters:,} parameters) on {chunks:,} chunks of at most {max_len} characters of "
          "{text} ({held:,} held out), {steps} steps, {preset} preset, on {where} -> {folder}").format(
        model=run["model"], parameters=run["parameters"], chunks=len(train_chunks), max_len=run["max_len"],
        text=run["pretrain_text"], held=len(held_out), steps=run["steps"], preset=run["preset"],
        where=describe(run, pick_device(args.device)), folder=folder))
    lengths = [len(c) for c in train_chunks]
    held_batches = list(mlm_batches(held_out, 128, vocab, seed=12345))  # the same masks at every evaluation

    def epoch_batches(epoch: int, ctx: ProcessContext) -> Iterator[MLMBatch]:
        groups = shard_groups(batch_order(lengths, run["batch_size"], run["seed"], epoch), ctx)
        return mlm_batches(train_chunks, run["batch_size"], vocab, run["seed"], epoch, groups=groups)

    def loss_fn(net: nn.Module, batch: MLMBatch) -> tuple[torch.Tensor, int]:
        return net(batch.inputs, batch.mask, batch.targets), len(batch.inputs)

    def evaluate(net: nn.Module, device: torch.device) -> dict[str, float]:
        correct = total = 0
        loss_sum = 0.0
        for batch in held_batches:
            batch = to_device(batch, device)
            logits = net.chosen_logits(batch.inputs, batch.mask, batch.targets).float()  # (chosen, vocab)
            targets = batch.targets[batch.targets != IGNORE_INDEX]                        # (chosen,)
            loss_sum += float(F.cross_entropy(logits, targets, reduction="sum"))
            correct, total = correct + int((logits.argmax(-1) == targets).sum()), total + len(targets)
        return {"valid_mlm_loss": loss_sum / total, "valid_mlm_accuracy": correct / total}

    result = train(mlm, loss_fn, epoch_batches, train_config(run, args, find_unused_parameters=True),
                   evaluate=evaluate, out=folder, schedule=warmup_cosine(run["warmup"], run["steps"]),
                   device=args.device, run_config=run)
    if result.is_main:
        print(_("masked characters predicted on held-out text: {accuracy:.1%}").format(
            accuracy=result.last_eval.get("valid_mlm_accuracy", 0)))
        impl = " --impl reference" if run["impl"] == "reference" else ""
        command = (f"course capstone finetune --model {run['model']} --preset {run['preset']}{impl} --out {args.out} "
                   f"--pretrained {folder}")
        print(_("pretrained for {train:.0f} s ({cpu:.0f} s of CPU); fine-tune it: {command}").format(
            train=result.train_seconds, cpu=result.cpu_seconds, command=command))
    return 0
