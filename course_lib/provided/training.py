"""One training loop for every model of the course: it resumes after a kill, and runs on 1 or N processes.

    result = train(model, loss_fn, batches, TrainConfig(steps=600, lr=2e-3, eval_every=200),
                   schedule=warmup_cosine(60, 600), evaluate=valid_accuracy, out=Path("runs/x"))

- ``loss_fn(model, batch) -> (loss, examples)``: the mean loss of one batch (already on the device) and
  how many examples it held (for the throughput).
- ``batches(epoch, ctx) -> iterable``: the batches of one epoch for this process (``ctx.rank`` of
  ``ctx.world``); it must give the same batches each time it is called with the same epoch, which is
  what makes a resumed run equal to an uninterrupted one (``capstone.batching`` is built that way).
- ``evaluate(model, device) -> {name: value}``: run by rank 0 in eval mode without gradients.
- ``schedule(step) -> factor``: the learning rate is ``lr * schedule(step)``; steps, never wall time.

What it does each step: forward under bf16 autocast (on cuda only), backward, gradient clipping,
AdamW, the schedule. Every ``log_every`` steps it shows loss, lr and examples/s on a tqdm bar and
appends them to ``out/metrics.jsonl``; every ``eval_every`` steps it evaluates; every
``checkpoint_every`` steps and at the end it saves model, optimizer, schedule, step, the random
generators of every rank and the run's settings to ``out/checkpoints/`` (atomically, see
``checkpoints``). Run the same command again after a kill and it continues from the newest checkpoint,
reaching the same weights as a run never stopped (bitwise on CPU); a checkpoint made with other
settings is refused, not mixed in. Under torchrun the model is wrapped in DistributedDataParallel:
each rank computes its share of every global batch, gradients are averaged, rank 0 alone logs (the
loss it logs is the global batch's: every rank's share summed). A resumed run prints the step it
resumes from; its ``train_seconds`` and ``examples_per_second`` count the whole run, resumes included.
"""
from __future__ import annotations

import contextlib
import functools
import json
import math
import time
from dataclasses import asdict, dataclass
from itertools import islice
from pathlib import Path
from typing import Any, Callable, Iterable

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel
from tqdm.auto import tqdm

from .checkpoints import latest_checkpoint, save_checkpoint
from .i18n import _
from .runtime import ProcessContext, pick_device, rng_state, seed_everything, set_rng_state, start_processes

Schedule = Callable[[int], float]
LossFn = Callable[[nn.Module, Any], tuple[Tensor, int]]
Batches = Callable[[int, ProcessContext], Iterable[Any]]
Evaluate = Callable[[nn.Module, torch.device], dict[str, float]]
MAY_DIFFER_ON_RESUME = ("progress", "compile", "log_every")  # settings that do not change the result


def constant(step: int) -> float:
    return 1.0


def _warmup_cosine(step: int, warmup: int, total: int, floor: float) -> float:
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def warmup_cosine(warmup: int, total: int, floor: float = 0.0) -> Schedule:
    """Linear warmup over ``warmup`` steps, then a cosine from 1 down to ``floor`` at step ``total``."""
    return functools.partial(_warmup_cosine, warmup=warmup, total=total, floor=floor)


def _inverse_sqrt(step: int, warmup: int) -> float:
    return min((step + 1) / warmup, math.sqrt(warmup / (step + 1)))


def warmup_inverse_sqrt(warmup: int) -> Schedule:
    """The paper's shape (section 5.3): up linearly for ``warmup`` steps, then down as 1/sqrt(step); 1 at the peak."""
    return functools.partial(_inverse_sqrt, warmup=warmup)


@dataclass
class TrainConfig:
    """The settings of one run; all of them are saved in its checkpoints."""
    steps: int
    lr: float = 1e-3
    weight_decay: float = 0.01        # on matrices only, never on biases and norm gains
    betas: tuple[float, float] = (0.9, 0.999)
    clip_norm: float | None = 1.0     # gradient clipping by global norm; None: off
    log_every: int = 20
    eval_every: int = 0               # 0: evaluate at the end only
    checkpoint_every: int = 0         # 0: a checkpoint at the end only (when there is an out folder)
    keep_checkpoints: int = 2
    seed: int = 0
    bf16: bool = True                 # autocast to bfloat16, on cuda only
    compile: bool = False             # torch.compile the model
    progress: bool = True             # the tqdm bar (rank 0)
    threads: int | None = None        # CPU threads of torch in this process (None: leave torch's setting); saved,
                                      # since CPU results depend on it: a resume with another count is refused
    find_unused_parameters: bool = False  # DDP: parameters that some losses do not reach (a classifier head in pretraining)


@dataclass
class TrainResult:
    model: nn.Module                  # the trained model, unwrapped (no DDP, no compile), on its device
    step: int
    resumed_from: int                 # the checkpoint's step, 0 for a fresh start
    last_eval: dict[str, float]
    train_seconds: float              # time in training steps, the whole run across resumes (evaluation and saving excluded)
    examples_per_second: float        # all ranks together, the whole run across resumes
    is_main: bool
    cpu_seconds: float = 0.0          # this process's CPU time in those steps, all threads, across resumes


def to_device(batch: Any, device: torch.device) -> Any:
    """``batch`` with every tensor in it (tuples, NamedTuples, lists, dicts) moved to ``device``."""
    if isinstance(batch, Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(to_device(x, device) for x in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(x, device) for x in batch)
    if isinstance(batch, dict):
        return {key: to_device(x, device) for key, x in batch.items()}
    return batch


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW groups: weight decay on matrices (dim >= 2: linear weights, embeddings), none on vectors."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def _settings(config: TrainConfig, run_config: dict[str, Any] | None) -> dict[str, Any]:
    """What must match to resume: the config without display options, and the caller's own settings."""
    train = {k: v for k, v in asdict(config).items() if k not in MAY_DIFFER_ON_RESUME}
    return json.loads(json.dumps({"train": train, "run": run_config or {}}))  # tuples -> lists, as saved


def _keep_metrics_until(path: Path, step: int) -> None:
    """Drop the records a killed run wrote after its last checkpoint: they are about to be redone."""
    if path.is_file():
        kept = [line for line in path.read_text(encoding="utf-8").splitlines()
                if line.strip() and json.loads(line).get("step", 0) <= step]
        path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")


class SettingsClash(ValueError):
    """``out`` holds a run with other settings: said in one line, never resumed into."""


def _differences(saved: Any, now: Any, where: str = "") -> list[str]:
    """``key: saved -> now`` for each setting that differs (nested dicts walked), to say why a resume is refused."""
    if isinstance(saved, dict) and isinstance(now, dict):
        return [line for key in sorted(set(saved) | set(now), key=str)
                for line in _differences(saved.get(key), now.get(key), f"{where}{key}.")]
    return [] if saved == now else [_("{key}: saved {saved}, now {now}").format(key=where.rstrip("."), saved=repr(saved),
                                                                               now=repr(now))]


def train(model: nn.Module, loss_fn: LossFn, batches: Batches, config: TrainConfig, *,
          schedule: Schedule = constant, evaluate: Evaluate | None = None, out: Path | None = None,
          device: str | torch.device | None = None, run_config: dict[str, Any] | None = None) -> TrainResult:
    """Train ``model`` for ``config.steps`` optimizer steps (see the module's docstring); resume from ``out``."""
    device = device if isinstance(device, torch.device) else pick_device(device)
    ctx = start_processes(device)
    if config.threads and device.type == "cpu":
        torch.set_num_threads(config.threads)  # after torchrun's process group, which sets its own share
    raw = model.to(device)
    net: nn.Module = raw
    if ctx.distributed:
        net = DistributedDataParallel(raw, device_ids=[device.index] if device.type == "cuda" else None,
                                      find_unused_parameters=config.find_unused_parameters)
    if config.compile:
        net = torch.compile(net)  # type: ignore[assignment]
    optimizer = torch.optim.AdamW(parameter_groups(raw, config.weight_decay), lr=config.lr, betas=config.betas)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    settings = _settings(config, run_config)
    folder = Path(out) / "checkpoints" if out is not None else None
    metrics_path = Path(out) / "metrics.jsonl" if out is not None else None
    step = epoch = batch_in_epoch = 0
    train_seconds, cpu_seconds, examples = 0.0, 0.0, 0  # the whole run's, carried across resumes
    last_eval: dict[str, float] = {}
    seed_everything(config.seed + ctx.rank)
    found = latest_checkpoint(folder) if folder is not None else None
    if found is not None:
        path, state = found
        if state.get("settings") != settings:
            changed = "; ".join(_differences(state.get("settings"), settings))
            raise SettingsClash(_("{out} holds a run with other settings ({changed}); run the same command as before "
                                  "to resume it, or give this run another --out (or delete {out}) to start over").format(
                                      out=out, changed=changed))
        raw.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        step, epoch, batch_in_epoch = state["step"], state["epoch"], state["batch_in_epoch"]
        train_seconds, cpu_seconds = state.get("train_seconds", 0.0), state.get("cpu_seconds", 0.0)
        examples = state.get("examples", 0)
        last_eval = dict(state.get("last_eval", {}))
        rngs = state["rng"]
        set_rng_state(rngs[ctx.rank] if ctx.rank < len(rngs) else rngs[0])
        if ctx.is_main and metrics_path is not None:
            _keep_metrics_until(metrics_path, step)
        if ctx.is_main:
            print(_("resumed from step {step} of {steps} ({path})").format(step=step, steps=config.steps, path=path),
                  flush=True)
    resumed_from = step
    autocast = (functools.partial(torch.autocast, "cuda", dtype=torch.bfloat16)
                if config.bf16 and device.type == "cuda" else contextlib.nullcontext)

    def log(record: dict[str, Any]) -> None:
        if ctx.is_main and metrics_path is not None:
            metrics_path.parent.mkdir(parents=True, exist_ok=True)
            with open(metrics_path, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")

    def run_evaluation() -> None:
        nonlocal last_eval
        if ctx.is_main and evaluate is not None:
            raw.eval()
            with torch.no_grad(), autocast():
                last_eval = {k: float(v) for k, v in evaluate(raw, device).items()}
            raw.train()
            log({"step": step, "split": "valid", **last_eval})
            bar.write(f"step {step}: " + ", ".join(f"{k} {v:.4g}" for k, v in last_eval.items()))
        ctx.barrier()

    def save() -> None:
        rngs = ctx.gather(rng_state())
        if ctx.is_main and folder is not None:
            save_checkpoint(folder, step, {
                "step": step, "epoch": epoch, "batch_in_epoch": batch_in_epoch, "model": raw.state_dict(),
                "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "rng": rngs,
                "settings": settings, "last_eval": last_eval, "train_seconds": train_seconds,
                "cpu_seconds": cpu_seconds, "examples": examples}, keep=config.keep_checkpoints)
        ctx.barrier()

    def window_mean(total: Tensor) -> float:
        """The mean loss of the window's examples over every rank: (sum of loss x examples, examples) summed."""
        if ctx.distributed:
            dist.all_reduce(total)  # every rank logs at the same steps, so every rank joins
        return float(total[0] / total[1])

    bar = tqdm(total=config.steps, initial=step, unit="step", dynamic_ncols=True,
               disable=not (ctx.is_main and config.progress))
    net.train()
    window = torch.zeros(2, device=device)  # (loss x examples, examples) of this rank since the last log
    window_examples = 0
    window_start = time.perf_counter()
    while step < config.steps:
        produced = 0
        for batch in islice(batches(epoch, ctx), batch_in_epoch, None):
            produced += 1
            started, cpu_started = time.perf_counter(), time.process_time()
            with autocast():
                loss, count = loss_fn(net, to_device(batch, device))
            loss.backward()
            grad_norm = (nn.utils.clip_grad_norm_(raw.parameters(), config.clip_norm)
                         if config.clip_norm is not None else None)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step, batch_in_epoch = step + 1, batch_in_epoch + 1
            window[0] += loss.detach().float() * count  # stays on the device: no sync until the log
            window[1] += count
            window_examples += count * ctx.world
            examples += count * ctx.world
            train_seconds += time.perf_counter() - started
            cpu_seconds += time.process_time() - cpu_started
            bar.update(1)
            if step % config.log_every == 0 or step == config.steps:
                elapsed = time.perf_counter() - window_start
                record = {"step": step, "split": "train", "epoch": epoch, "loss": window_mean(window),
                          "lr": scheduler.get_last_lr()[0], "examples_per_s": window_examples / max(elapsed, 1e-9)}
                if grad_norm is not None:
                    record["grad_norm"] = float(grad_norm)
                log(record)
                bar.set_postfix(loss=f"{record['loss']:.4f}", lr=f"{record['lr']:.2e}",
                                ex_s=f"{record['examples_per_s']:.0f}")
                window, window_examples = torch.zeros(2, device=device), 0
                window_start = time.perf_counter()
            if config.eval_every and step % config.eval_every == 0 or step == config.steps:
                run_evaluation()
                window_start = time.perf_counter()
            if folder is not None and (config.checkpoint_every and step % config.checkpoint_every == 0
                                       or step == config.steps):
                save()
                window_start = time.perf_counter()
            if step >= config.steps:
                break
        else:
            if produced == 0 and batch_in_epoch == 0:
                raise ValueError(f"batches({epoch}, rank {ctx.rank}) gave no batch: nothing to train on")
            epoch, batch_in_epoch = epoch + 1, 0
    bar.close()
    ctx.close()
    return TrainResult(raw, step, resumed_from, last_eval, train_seconds,
                       examples / train_seconds if train_seconds else 0.0, ctx.is_main, cpu_seconds)
