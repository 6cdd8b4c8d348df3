"""Checkpoints that survive a kill: written whole or not at all, and the newest readable one found again.

    save_checkpoint(folder, step, state)     # folder/step-00000200.pt, atomically; older ones pruned
    found = latest_checkpoint(folder)        # (path, state) of the newest that loads, or None

A checkpoint is first written to a hidden temporary file beside its final name, flushed to disk, then
renamed over the final name (``os.replace`` is atomic on one file system). A process killed while
writing leaves a ``.tmp`` file that no search looks at, never a half-written ``step-*.pt``. A file that
is damaged anyway (a full disk, a copy cut short) fails to load and the next older one is taken.

Files are read with ``torch.load(weights_only=True)``: tensors, numbers, strings, lists and dicts only,
so opening a checkpoint from elsewhere cannot run code.
"""
from __future__ import annotations

import os
import re
import warnings
from pathlib import Path
from typing import Any

import torch

_NAME = re.compile(r"^step-(\d{8})\.pt$")
REQUIRED = ("step", "model")  # keys every checkpoint holds; a file without them is not one of ours


def checkpoint_path(folder: Path, step: int) -> Path:
    """Where the checkpoint of ``step`` lives: ``folder/step-00000200.pt`` (sorts by step)."""
    return Path(folder) / f"step-{step:08d}.pt"


def list_checkpoints(folder: Path) -> list[tuple[int, Path]]:
    """(step, path) of every finished checkpoint file in ``folder``, newest first; temporary files excluded."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _NAME.match(p.name)) and p.is_file()]
    return sorted(found, reverse=True)


def save_checkpoint(folder: Path, step: int, state: dict[str, Any], keep: int = 2) -> Path:
    """Write ``state`` as the checkpoint of ``step`` atomically; keep only the newest ``keep`` files."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = checkpoint_path(folder, step)
    tmp = folder / f".{path.name}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as handle:
            torch.save(state, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)  # atomic: readers see the old directory entry or the whole new file
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_dir(folder)
    for _, old in list_checkpoints(folder)[max(keep, 1):]:
        old.unlink(missing_ok=True)
    return path


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """The state saved in ``path`` (tensors moved to ``map_location``); raises if it is not a whole checkpoint."""
    state = torch.load(path, map_location=map_location, weights_only=True)
    if not isinstance(state, dict) or any(key not in state for key in REQUIRED):
        raise ValueError(f"{path} is not a training checkpoint (it lacks {list(REQUIRED)})")
    return state


def latest_checkpoint(folder: Path, map_location: str | torch.device = "cpu") -> tuple[Path, dict[str, Any]] | None:
    """The newest checkpoint in ``folder`` that loads, with its state; damaged files are skipped with a warning."""
    for _, path in list_checkpoints(folder):
        try:
            return path, load_checkpoint(path, map_location)
        except Exception as err:  # a truncated zip, a foreign pickle, a wrong dict: not usable
            warnings.warn(f"skipping the damaged checkpoint {path}: {type(err).__name__}: {err}", stacklevel=2)
    return None


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
