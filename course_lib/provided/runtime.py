"""Where and how a training process runs: seeds, the device, and its rank when torchrun starts several.

    seed_everything(0)                 # Python, NumPy and torch (CPU and every GPU) from one number
    device = pick_device()             # cuda:LOCAL_RANK with an NVIDIA GPU, else mps (Apple), else cpu;
                                       # pick_device("cpu") forces
    ctx = start_processes(device)      # under torchrun: init_process_group (nccl on cuda, gloo on cpu)
    ctx.rank, ctx.world, ctx.is_main   # 0, 1, True in a plain `python ...` run
    shard_groups(groups, ctx)          # this rank's part of each global batch of indices
    ctx.close()                        # barrier, then destroy_process_group

torchrun (``python -m torch.distributed.run --nproc_per_node N ...``) starts N copies of the same
command and tells each who it is through the environment: ``RANK`` (0..N-1 over all machines),
``WORLD_SIZE`` (N) and ``LOCAL_RANK`` (its GPU on this machine). Without them, one process trains alone.
"""
from __future__ import annotations

import os
import random
from dataclasses import dataclass
from typing import Any, Sequence, TypeVar

import numpy as np
import torch
import torch.distributed as dist

from .i18n import _

T = TypeVar("T")


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy and torch (CPU and all GPUs), so that a run repeats."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # seeds every CUDA device too


def rng_state() -> dict[str, Any]:
    """The state of every random generator this process uses, in types ``torch.load(weights_only=True)`` reads."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state(),
                             "numpy": [kind, keys.tolist(), pos, has_gauss, cached]}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Put back the generators that ``rng_state`` saved (the CUDA ones only where CUDA is present)."""
    random.setstate(_tuples(state["python"]))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _tuples(value: Any) -> Any:
    """``random.setstate`` wants tuples; a round trip through a checkpoint may have made them lists."""
    return tuple(_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


def mps_available() -> bool:
    """Whether this torch can use Apple's GPU (Metal, the ``mps`` device): a Mac with Apple silicon or an AMD GPU,
    macOS 12.3 or newer, a torch built for it. False on every other machine, and on a torch without the backend."""
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def default_device() -> str:
    """The device a run takes when not told: ``cuda`` with an NVIDIA GPU, else ``mps`` on a Mac that has one,
    else ``cpu``. On mps, training runs in float32 (the training loop's bf16 autocast is CUDA's only) and its
    batches are made in the training process (no DataLoader workers: nothing to fork or spawn)."""
    if torch.cuda.is_available():
        return "cuda"
    return "mps" if mps_available() else "cpu"


def pick_device(choice: str | None = None, local_rank: int | None = None) -> torch.device:
    """``choice`` if given ("cpu", "cuda", "cuda:1", "mps"), else ``default_device()``: cuda, mps or cpu.

    Under torchrun each process takes the GPU of its ``LOCAL_RANK``. A device this torch cannot use is
    refused here, in one line, rather than by the first tensor sent there.
    """
    if local_rank is None:
        local_rank = int(os.environ.get("LOCAL_RANK", 0))
    name = choice or default_device()
    if name == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(_("--device cuda: this torch sees no CUDA GPU (torch.cuda.is_available() is False)"))
        name = f"cuda:{local_rank}"
    if torch.device(name).type == "mps" and not mps_available():
        raise RuntimeError(_("--device mps: this torch sees no Apple GPU (torch.backends.mps.is_available() is "
                             "False); mps needs a Mac with Apple silicon and macOS 12.3 or newer"))
    return torch.device(name)


@dataclass(frozen=True)
class ProcessContext:
    """This process's place among those torchrun started: one alone has rank 0 in a world of 1."""
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def distributed(self) -> bool:
        return self.world > 1

    @property
    def is_main(self) -> bool:
        """Rank 0 alone logs, shows the progress bar, evaluates and writes checkpoints."""
        return self.rank == 0

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier()

    def gather(self, obj: T) -> list[T]:
        """``obj`` from every rank, by rank (a list of one when alone)."""
        if not self.distributed:
            return [obj]
        found: list[Any] = [None] * self.world
        dist.all_gather_object(found, obj)
        return found

    def close(self) -> None:
        """Wait for every rank, then leave the process group (a no-op when alone)."""
        if self.distributed and dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()


def process_context() -> ProcessContext:
    """Rank, world size and local rank from torchrun's environment (rank 0 of 1 without it)."""
    return ProcessContext(int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)),
                          int(os.environ.get("LOCAL_RANK", 0)))


def start_processes(device: torch.device) -> ProcessContext:
    """Join torchrun's process group (nccl on cuda, gloo on cpu) when there is one; the context either way."""
    ctx = process_context()
    if ctx.distributed and device.type == "mps":
        raise RuntimeError(_("torchrun on mps: PyTorch has no process group for Apple's GPU; run one process "
                             "(without torchrun), or give --device cpu"))
    if ctx.distributed and not dist.is_initialized():
        if device.type == "cuda":
            torch.cuda.set_device(device)
        else:  # N processes share the cores: do not let each start a thread per core
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", ctx.world))))
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return ctx


def shard_groups(groups: Sequence[Sequence[int]], ctx: ProcessContext) -> list[list[int]]:
    """This rank's share of each global batch: rows ``rank, rank + world, ...`` of every group.

    Every rank gets as many batches as the others (DistributedDataParallel waits for all at each
    step), so a group with fewer rows than ranks is left out. Alone, the groups come back unchanged.
    """
    if not ctx.distributed:
        return [list(group) for group in groups]
    return [list(group[ctx.rank::ctx.world]) for group in groups if len(group) >= ctx.world]
