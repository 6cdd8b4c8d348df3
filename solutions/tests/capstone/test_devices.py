"""The capstone on a laptop (issue 43, part 4): a Mac's GPU (``mps``) where there is one, float32 there, no workers.

No Mac here, so the backends are mocked (``torch.backends.mps.is_available`` and ``torch.cuda.is_available``
patched) and what a run decides from them is checked: the device ``pick_device`` takes, the preset, torch's
threads, the verify notice, torchrun refused; ``train`` on a device named mps (its tensors kept on the CPU by
``named_mps``) runs without autocast, in float32, and the capstone's models hold nothing mps cannot (float64).
The batches come from no worker process (nothing a Windows or macOS laptop, which start processes by ``spawn``,
would have to start), and the DataLoader of ``make_loader`` gives the same batches from a spawned worker.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.provided import runtime
from course_lib.provided.capstone import ensemble, run, stages
from course_lib.provided.capstone.batching import collate, make_loader
from course_lib.provided.capstone.models import add_bigrams, build_classifier
from course_lib.provided.layout import LAYOUT
from course_lib.provided.training import TrainConfig, train

MACHINES = {  # (torch.cuda.is_available(), torch.backends.mps.is_available()) -> the device taken, unasked
    "nvidia": ((True, False), "cuda:0"), "nvidia and mps": ((True, True), "cuda:0"),
    "mac": ((False, True), "mps"), "neither": ((False, False), "cpu")}


def machine(monkeypatch: pytest.MonkeyPatch, cuda: bool, mps: bool) -> None:
    """Make torch report these backends (nothing is sent to them: see ``named_mps`` for that)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    monkeypatch.delenv("LOCAL_RANK", raising=False)


@pytest.fixture
def mac(monkeypatch: pytest.MonkeyPatch) -> None:
    machine(monkeypatch, cuda=False, mps=True)


@pytest.mark.parametrize("name", MACHINES)
def test_the_device_is_cuda_then_mps_then_cpu(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    (cuda, mps), taken = MACHINES[name]
    machine(monkeypatch, cuda, mps)
    assert str(runtime.pick_device()) == taken
    assert str(runtime.pick_device("cpu")) == "cpu"  # asked for: always


def test_mps_asked_for_where_there_is_none_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    machine(monkeypatch, cuda=False, mps=False)
    with pytest.raises(RuntimeError, match=r"--device mps: this torch sees no Apple GPU"):
        runtime.pick_device("mps")
    monkeypatch.setenv("COURSE_LANG", "zh_CN")
    with pytest.raises(RuntimeError, match="看不到 Apple 的 GPU"):
        runtime.pick_device("mps:0")


def test_torchrun_on_mps_is_refused_before_any_process_group(mac: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(RuntimeError, match="torchrun on mps"):
        runtime.start_processes(runtime.pick_device())
    assert not torch.distributed.is_initialized()


def test_a_run_on_mps_takes_the_cpu_preset_no_threads_and_is_told_verify_cannot_redo_it(
        mac: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    args = run.parser().parse_args(["finetune", "--model", "transformer", "--out", str(tmp_path)])
    assert stages.preset_name(args) == "cpu"  # `full` is sized for an NVIDIA GPU
    assert stages.cpu_threads(args, tmp_path) is None  # torch's CPU threads left alone, as on a GPU
    notices = ensemble.unverifiable(stages.settings(args, "finetune"), args)
    assert any("trains on mps" in notice and "--device cpu" in notice for notice in notices), notices
    machine(monkeypatch, cuda=True, mps=True)  # the same command on an NVIDIA machine: the GPU's preset
    assert stages.preset_name(args) == "full"


@pytest.fixture
def named_mps(mac: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A device named mps whose tensors stay on the CPU: what is sent to mps (``.to``, ``torch.zeros(device=)``)
    goes to the CPU, so that ``train`` runs its mps branch here."""
    def on_cpu(value: Any) -> Any:
        return "cpu" if isinstance(value, (str, torch.device)) and torch.device(value).type == "mps" else value

    def moved(original):  # noqa: ANN001, ANN202
        def call(*args: Any, **kwargs: Any) -> Any:
            return original(*[on_cpu(a) if isinstance(a, (str, torch.device)) else a for a in args],
                            **{k: on_cpu(v) if k == "device" else v for k, v in kwargs.items()})
        return call

    monkeypatch.setattr(torch.Tensor, "to", moved(torch.Tensor.to))
    monkeypatch.setattr(nn.Module, "to", moved(nn.Module.to))
    monkeypatch.setattr(torch, "zeros", moved(torch.zeros))


def test_training_on_mps_runs_in_float32_without_autocast(named_mps: None) -> None:
    seen: list[tuple[bool, bool, torch.dtype]] = []

    def loss_fn(net: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, int]:
        x, y = batch
        logits = net(x)                                                               # (batch, 2)
        seen.append((torch.is_autocast_enabled("mps"), torch.is_autocast_enabled("cpu"), logits.dtype))
        return F.cross_entropy(logits, y), len(y)

    torch.manual_seed(0)
    data = [(torch.randn(4, 3), torch.tensor([0, 1, 0, 1])) for _ in range(2)]
    device = runtime.pick_device()
    assert device.type == "mps"
    result = train(nn.Linear(3, 2), loss_fn, lambda epoch, ctx: data, TrainConfig(steps=2, progress=False, bf16=True),
                   device=device)
    assert result.step == 2 and seen == [(False, False, torch.float32)] * 2
    assert {p.dtype for p in result.model.parameters()} == {torch.float32}


@pytest.mark.parametrize("model", ["lstm", "transformer"])
def test_the_capstone_models_hold_nothing_mps_lacks(model: str) -> None:
    """mps has no float64: every parameter and buffer float32 (or an integer, a mask), and the batches' ids long."""
    net = build_classifier(model, 40, 0, "quick", 16, 0.1, impl="reference")
    if model == "transformer":
        net = add_bigrams(net, [5, 9, 12], 40, 0)
    held = {t.dtype for t in [*net.parameters(), *net.buffers()]}
    assert held <= {torch.float32, torch.long, torch.bool} and torch.float32 in held, held
    batch = collate([([4, 5, 6], 1), ([7], 0)], pad_id=0)
    assert {batch.tokens.dtype, batch.labels.dtype} == {torch.long}


TRAINING_PATH = [LAYOUT.course_lib / "provided" / "training.py",
                 *[p for p in (LAYOUT.course_lib / "provided" / "capstone").glob("*.py") if p.name != "batching.py"]]


def names_used(path: Path) -> set[str]:
    """Every name and attribute the module's code uses (docstrings and comments aside)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return ({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
            | {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
            | {a.name.split(".")[-1] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
            | {k.arg for n in ast.walk(tree) if isinstance(n, ast.Call) for k in n.keywords if k.arg})


def test_no_training_stage_starts_worker_processes() -> None:
    """The stages make their batches in the training process (batch_order, collate): no DataLoader, no workers."""
    workers = {"DataLoader", "make_loader", "num_workers", "Pool", "Process", "ProcessPoolExecutor", "fork"}
    assert {p.name: names_used(p) & workers for p in TRAINING_PATH if names_used(p) & workers} == {}
    assert "DataLoader" in names_used(LAYOUT.course_lib / "provided" / "capstone" / "batching.py")  # the scan sees


def test_make_loader_has_no_workers_unless_asked_and_a_spawned_worker_gives_the_same_batches() -> None:
    """Windows and macOS start a DataLoader's workers by spawn: the dataset and collate function are pickled."""
    examples = [([i % 7 + 4] * (i % 5 + 1), i % 2) for i in range(24)]
    alone = make_loader(examples, 8, 0, seed=3)
    assert alone.num_workers == 0
    spawned = make_loader(examples, 8, 0, seed=3, num_workers=1, multiprocessing_context="spawn")
    pairs = list(zip(alone, spawned, strict=True))
    assert len(pairs) == 3
    for one, other in pairs:
        assert torch.equal(one.tokens, other.tokens) and torch.equal(one.labels, other.labels)
